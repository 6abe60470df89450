package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eventhub/eventhub/wire"
)

// Server-Sent Events: GET /sse/{topic} follows a topic as a live WebSocket
// subscription does, for clients that cannot speak WebSocket (proxies that
// block it, curl). Each event is sent with its stream position as the SSE
// id, so an EventSource that reconnects resumes through the same recovery
// (its Last-Event-ID header), with no gap and no duplicate.
//
// The token comes in the Authorization header, or, for EventSource, which
// cannot set headers, in the access_token query parameter (RFC 6750). The
// hub never logs request URLs.

// sseSink is the sink of one SSE stream: a bounded queue that the handler
// goroutine drains.
type sseSink struct {
	q    chan []byte
	slow chan struct{} // closed when the queue overflowed
	once sync.Once
	// backlog holds a recovery's (or a snapshot's) events, at most
	// backlogMax: they are queued by the handler goroutine itself, before
	// it starts writing, and written first.
	backlog    [][]byte
	backlogMax int
}

func (k *sseSink) sendRecovered(ev *liveEvent) bool {
	if len(k.backlog) >= k.backlogMax {
		k.once.Do(func() { close(k.slow) })
		return false
	}
	k.backlog = append(k.backlog, ev.sseFrame())
	return true
}

func (k *sseSink) sendLive(ev *liveEvent) bool {
	select {
	case k.q <- ev.sseFrame():
		return true
	default:
		k.once.Do(func() { close(k.slow) })
		return false
	}
}

func (k *sseSink) sendReady(r liveReady) {
	var b []byte
	if r.Seq > 0 {
		// The position live events continue after: an EventSource that
		// reconnects before the first event resumes from it.
		b = fmt.Appendf(b, "id: %d\n", r.Seq)
	}
	b = fmt.Appendf(b, "event: ready\ndata: {\"recovered\":%t,\"seq\":%d", r.Recovered, r.Seq)
	if r.First != 0 {
		b = fmt.Appendf(b, ",\"first\":%d", r.First)
	}
	b = append(b, "}\n\n"...)
	select {
	case k.q <- b:
	default:
		k.once.Do(func() { close(k.slow) })
	}
}

// serveSSE is GET /sse/{topic}[?since=seq|&snapshot=true][&key_prefix=p]:
// admission, the follow, then the write loop.
func (g *Gateway) serveSSE(w http.ResponseWriter, r *http.Request) {
	if tok := r.URL.Query().Get("access_token"); tok != "" && r.Header.Get("Authorization") == "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	p, topic, ok := g.httpTopic(w, r, "sse", ActionSubscribe)
	if !ok {
		return
	}
	opts, err := sseOptions(r)
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	leave, err := g.admitStream(r, p)
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	defer leave()
	ls, sink, err := g.followSSE(r, p, topic, opts)
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	defer g.unfollow(ls)
	g.writeSSE(w, r, p, sink)
}

// admitStream admits an event stream of p as a WebSocket is admitted: to
// an open gateway, within the per-address and per-principal connection
// quotas. leave gives back what the stream holds.
func (g *Gateway) admitStream(r *http.Request, p Principal) (leave func(), err error) {
	if !g.enter() {
		return nil, wire.ErrGoingAway
	}
	releaseIP, err := g.admitIP(r)
	if err != nil {
		g.wg.Done()
		return nil, err
	}
	releaseConn := func() {}
	if g.cfg.Limiter != nil && p != nil {
		if releaseConn, err = g.cfg.Limiter.Connect(p); err != nil {
			releaseIP()
			g.wg.Done()
			return nil, err
		}
	}
	return func() { releaseConn(); releaseIP(); g.wg.Done() }, nil
}

// followSSE counts the stream's subscription and follows topic into the
// stream's sink; the subscription's count is given back with the follow.
func (g *Gateway) followSSE(r *http.Request, p Principal, topic string, opts wire.LiveOptions) (*liveSub, *sseSink, error) {
	release, err := g.holdSubscription(r.Context(), p)
	if err != nil {
		return nil, nil, err
	}
	sink := &sseSink{q: make(chan []byte, g.cfg.OutboundQueue), slow: make(chan struct{}), backlogMax: g.cfg.OutboundQueue + g.cfg.LiveRecoveryLimit + 1}
	ctx, cancel := context.WithTimeout(g.bind(r.Context(), p), g.cfg.RequestTimeout)
	ls, err := g.follow(ctx, topic, opts, sink)
	cancel()
	if err != nil {
		release()
		return nil, nil, err
	}
	ls.mu.Lock()
	ls.release = release
	ls.mu.Unlock()
	return ls, sink, nil
}

// writeSSE writes the stream: what the recovery read first, then the
// ready event and the live events, with keepalives, until the client
// goes, lags, its token expires or the gateway shuts down.
func (g *Gateway) writeSSE(w http.ResponseWriter, r *http.Request, p Principal, sink *sseSink) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // proxies: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var expired <-chan time.Time
	if exp := p.ExpiresAt(); !exp.IsZero() {
		t := time.NewTimer(time.Until(exp))
		defer t.Stop()
		expired = t.C
	}
	ping := time.NewTicker(g.cfg.PingInterval)
	defer ping.Stop()
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(g.cfg.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		// Write what else is queued before flushing: one flush a burst.
		// Only this goroutine receives from sink.q.
		for len(sink.q) > 0 {
			if _, err := w.Write(<-sink.q); err != nil {
				return false
			}
		}
		return rc.Flush() == nil
	}
	// What the recovery read comes first, then the ready event and the
	// live events queued meanwhile.
	for _, b := range sink.backlog {
		_ = rc.SetWriteDeadline(time.Now().Add(g.cfg.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return
		}
	}
	sink.backlog = nil
	var code string
	for code == "" {
		select {
		case b := <-sink.q:
			if !write(b) {
				return
			}
		case <-ping.C:
			if !write([]byte(": keepalive\n\n")) {
				return
			}
		case <-sink.slow:
			g.liveDrops.Add(1)
			code = wire.CodeSlowClient
		case <-expired:
			code = wire.CodeTokenExpired
		case <-g.done:
			code = wire.CodeGoingAway
		case <-r.Context().Done():
			return
		}
	}
	_ = write([]byte("event: error\ndata: {\"code\":\"" + code + "\"}\n\n"))
}

// sseOptions reads since (or the Last-Event-ID an EventSource sends when it
// reconnects), snapshot and key_prefix.
func sseOptions(r *http.Request) (wire.LiveOptions, error) {
	var o wire.LiveOptions
	q := r.URL.Query()
	since := q.Get("since")
	if id := strings.TrimSpace(r.Header.Get("Last-Event-ID")); id != "" {
		since = id
	}
	if since != "" {
		seq, err := strconv.ParseUint(since, 10, 64)
		if err != nil {
			return o, wire.Errorf(wire.CodeBadRequest, "since / Last-Event-ID: want a stream position, not %q", since)
		}
		o.Since = &wire.LivePosition{Seq: seq}
	}
	switch q.Get("snapshot") {
	case "", "false":
	case "true":
		o.Snapshot = o.Since == nil // a resumed stream continues from its position
	default:
		return o, wire.Errorf(wire.CodeBadRequest, "snapshot: want true or false")
	}
	if q.Has("key_prefix") {
		prefix := q.Get("key_prefix")
		o.KeyPrefix = &prefix
	}
	return o, validLive(o)
}
