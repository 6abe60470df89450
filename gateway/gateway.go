package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/wsbatch"
	"github.com/eventhub/eventhub/wire"
)

// Gateway serves the WebSocket protocol and the HTTP publish endpoint over a
// [facade.Bus]. It is safe for concurrent use.
type Gateway struct {
	cfg  Config
	bus  facade.Bus
	apub facade.AsyncPublisher // nil: PUBLISH frames are stored one at a time
	auth Authenticator
	log  *slog.Logger

	upgrader websocket.Upgrader
	mux      *http.ServeMux
	nextID   atomic.Uint64

	members *sharedTable[memberKey, *member] // the gateway's bus members, shared by sessions

	live       *sharedTable[string, *liveTopic] // the gateway's followers, by topic
	liveFanout atomic.Uint64                    // live events queued to subscribers
	liveDrops  atomic.Uint64                    // live subscriptions ended as too slow

	done chan struct{} // closed by Shutdown

	mu       sync.Mutex
	sessions map[*session]transport
	servers  map[*http.Server]struct{}
	closed   bool
	wg       sync.WaitGroup // sessions
}

// New returns a Gateway over bus. It does not own bus: [Gateway.Shutdown]
// stops the gateway's subscriptions but never closes the bus. If bus
// implements [facade.AsyncPublisher] PUBLISH frames of one connection are
// pipelined; if its deliveries implement [facade.Releaser], events whose
// EVENT frame was never written when a connection drops go back without
// spending an attempt.
func New(bus facade.Bus, cfg Config) (*Gateway, error) {
	if bus == nil {
		return nil, errors.New("gateway: nil bus")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	g := &Gateway{
		cfg:      cfg,
		bus:      bus,
		auth:     cfg.authenticator(),
		log:      cfg.Logger,
		sessions: make(map[*session]transport),
		servers:  make(map[*http.Server]struct{}),
		members:  newSharedTable[memberKey, *member]("the group's member"),
		done:     make(chan struct{}),
		live:     newSharedTable[string, *liveTopic]("the topic's follower"),
	}
	g.apub, _ = bus.(facade.AsyncPublisher)
	g.upgrader = websocket.Upgrader{
		HandshakeTimeout: cfg.HandshakeTimeout,
		// Idle connections hold no write buffer.
		WriteBufferPool:   &sync.Pool{},
		EnableCompression: false,
		CheckOrigin: func(r *http.Request) bool {
			return cfg.originAllowed(r.Header.Get("Origin"), r.Host)
		},
	}
	g.mux = http.NewServeMux()
	g.mux.HandleFunc("GET /{$}", g.serveWS)
	g.mux.HandleFunc("GET /ws", g.serveWS)
	g.mux.HandleFunc("POST /publish/{topic}", g.servePublish)
	g.mux.HandleFunc("DELETE /publish/{topic}", g.serveDelete)
	g.mux.HandleFunc("GET /sse/{topic}", g.serveSSE)
	g.mux.HandleFunc("/", serveUnrouted)
	return g, nil
}

// serveUnrouted answers a request no endpoint takes, in the JSON error
// shape of the endpoints: 405 (with Allow) for an endpoint's path with
// another method, else 404.
func serveUnrouted(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	oneSegment := func(prefix string) bool {
		rest, ok := strings.CutPrefix(p, prefix)
		return ok && rest != "" && !strings.Contains(rest, "/")
	}
	var allow string
	switch {
	case p == "/" || p == "/ws":
		allow = "GET"
	case oneSegment("/publish/"):
		allow = "POST, DELETE"
	case oneSegment("/sse/"):
		allow = "GET"
	}
	if allow != "" {
		w.Header().Set("Allow", allow)
		writeHTTPError(w, fmt.Errorf("%w: %s %s: this endpoint takes %s", wire.ErrMethodNotAllowed, r.Method, p, allow))
		return
	}
	writeHTTPError(w, fmt.Errorf("%w: no endpoint %s %s (the gateway serves POST and DELETE /publish/{topic}, GET /sse/{topic} and WebSocket upgrades on / and /ws)",
		facade.ErrNotFound, r.Method, p))
}

// Handler returns the gateway's HTTP handler: WebSocket upgrades on "/" and
// "/ws", "POST /publish/{topic}", "DELETE /publish/{topic}" (delete a key)
// and the Server-Sent Events of
// "GET /sse/{topic}".
func (g *Gateway) Handler() http.Handler { return g.mux }

// Config returns the gateway's configuration with defaults applied.
func (g *Gateway) Config() Config { return g.cfg }

// enter admits a connection (a WebSocket or an event stream) to an open
// gateway: false when it is shutting down; true counts the connection in
// g.wg, which the caller releases with g.wg.Done when it ends.
func (g *Gateway) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.wg.Add(1)
	}
	return !g.closed
}

func (g *Gateway) serveWS(w http.ResponseWriter, r *http.Request) {
	if !g.enter() {
		http.Error(w, "gateway shutting down", http.StatusServiceUnavailable)
		return
	}
	defer g.wg.Done()

	var bc *wsbatch.Conn
	var brw *bufio.ReadWriter
	ws, err := g.upgrader.Upgrade(hijackWrapper{w, &bc, &brw}, r, nil)
	if err != nil {
		g.log.Debug("upgrade refused", "remote", r.RemoteAddr, "err", err)
		return // the upgrader has answered
	}
	releaseHandshakeBuffer(brw)
	id := g.nextID.Add(1)
	log := g.log.With("session", id, "remote", r.RemoteAddr)
	t := newWSTransport(ws, bc, g.cfg.OutboundQueue, g.cfg.WriteTimeout, g.cfg.PingInterval, log)
	t.backlog = g.cfg.LiveRecoveryLimit
	s := newSession(g, t, log)
	s.meta.id, s.meta.remote, s.meta.started = id, r.RemoteAddr, time.Now()
	if release, err := g.admitIP(r); err != nil {
		s.replyErr("", err, wire.CodeConnQuota)
		s.closeWith(wire.CloseQuota, wire.CodeConnQuota)
	} else {
		defer release()
	}

	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		s.closeWith(wire.CloseGoingAway, wire.CodeGoingAway)
	} else {
		g.sessions[s] = t
		g.mu.Unlock()
	}
	log.Debug("session open")

	var writer sync.WaitGroup
	writer.Go(t.run)
	reason := g.read(s, ws)
	t.Close(wire.CloseNormal, "")
	s.end(reason)
	s.releaseLimits()
	writer.Wait()
	// The reader stopped reading when the session began to close: what the
	// client sent since is read (and dropped) until it answers the close.
	t.linger(reason != reasonClosing)

	g.mu.Lock()
	delete(g.sessions, s)
	g.mu.Unlock()
	log.Debug("session closed", "reason", reason)
}

// read is the session's reader loop. It returns why it stopped.
func (g *Gateway) read(s *session, ws *websocket.Conn) (reason string) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("reader panic", "panic", r)
			s.t.Close(wire.CloseServerError, wire.CodeServerError)
			reason = wire.CodeServerError
		}
	}()
	idle := g.cfg.IdleTimeout
	_ = ws.SetReadDeadline(time.Now().Add(idle))
	ws.SetPongHandler(func(string) error {
		return ws.SetReadDeadline(time.Now().Add(idle))
	})
	buf := make([]byte, 0, 512)
	for !s.closing.Load() {
		// A client that asked for batches may send a message of up to
		// BatchMaxBytes whatever MaxFrameBytes is; each of its frames is
		// still held to MaxFrameBytes (see session.handle).
		limit := g.cfg.MaxFrameBytes
		if s.batch {
			limit = max(limit, wire.BatchMaxBytes)
		}
		ws.SetReadLimit(4 * limit)
		mt, r, err := ws.NextReader()
		if err != nil {
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				s.t.Close(wire.CloseIdle, wire.CodeIdle)
				return wire.CodeIdle
			case errors.Is(err, websocket.ErrReadLimit):
				return wire.CodeFrameTooLarge
			}
			return "read: " + err.Error()
		}
		_ = ws.SetReadDeadline(time.Now().Add(idle))
		var tooLarge bool
		buf, tooLarge, err = readFrame(r, buf[:0], limit)
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				return wire.CodeFrameTooLarge
			}
			return "read: " + err.Error()
		}
		switch {
		case s.closing.Load():
			// The session began to close while the frame came in: it is
			// dropped, as everything after it.
		case tooLarge:
			s.sendErr("", wire.CodeFrameTooLarge, "frame larger than "+strconv.FormatInt(limit, 10)+" bytes discarded")
		case mt != websocket.TextMessage:
			s.sendErr("", wire.CodeBadFrame, "binary messages are not supported; send JSON text")
		default:
			s.handle(buf)
		}
		if cap(buf) > 64<<10 {
			buf = make([]byte, 0, 512)
		}
	}
	return reasonClosing
}

// reasonClosing: the reader stopped because the session is closing, with
// frames of the client possibly unread.
const reasonClosing = "closing"

// readFrame reads one message into buf. A message larger than limit is
// read to its end and discarded (tooLarge).
func readFrame(r io.Reader, buf []byte, limit int64) (_ []byte, tooLarge bool, _ error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			_, err := io.Copy(io.Discard, r)
			return buf[:0], true, err
		}
		if err == io.EOF {
			return buf, false, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
}

// hijackWrapper hands gorilla a wsbatch.Conn instead of the raw connection.
type hijackWrapper struct {
	http.ResponseWriter
	bc  **wsbatch.Conn
	brw **bufio.ReadWriter
}

func (h hijackWrapper) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := h.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("gateway: response does not support hijacking")
	}
	c, rw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	bc := &wsbatch.Conn{Conn: c}
	*h.bc = bc
	*h.brw = rw
	return bc, rw, nil
}

// releaseHandshakeBuffer lets go of net/http's write buffer once the
// handshake is written: the gateway writes through its own buffers, and
// the server goroutine that serves the session would otherwise keep 4 KiB
// per connection alive for nothing. The hijacked buffers are ours.
func releaseHandshakeBuffer(brw *bufio.ReadWriter) {
	if brw != nil && brw.Writer != nil {
		*brw.Writer = bufio.Writer{}
	}
}

// Shutdown stops accepting connections, closes every session with 1001
// (going away) after its queued frames, hands the sessions' in-flight
// events back to their groups, and waits for the sessions to end. It
// returns ctx.Err() if they did not in time. It does not close the bus.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	if !g.closed {
		close(g.done)
	}
	g.closed = true
	servers := make([]*http.Server, 0, len(g.servers))
	for s := range g.servers {
		servers = append(servers, s)
	}
	ss := make([]*session, 0, len(g.sessions))
	for s := range g.sessions {
		ss = append(ss, s)
	}
	g.mu.Unlock()

	var errs []error
	for _, srv := range servers {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range ss {
		s.closeWith(wire.CloseGoingAway, wire.CodeGoingAway)
	}
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

// Close is Shutdown bounded by 10 seconds. It is idempotent.
func (g *Gateway) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return g.Shutdown(ctx)
}

// Serve serves the gateway's [Gateway.Handler] on ln with timeouts against
// slow clients, until ctx is done or [Gateway.Shutdown] is called; then it
// shuts the gateway down and returns nil. It closes ln.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           g.mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		ln.Close()
		return facade.ErrClosed
	}
	g.servers[srv] = struct{}{}
	g.mu.Unlock()

	shutdown := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(shutdown)
		_ = g.Close()
	})
	err := srv.Serve(ln)
	if !stop() {
		<-shutdown
	}
	g.mu.Lock()
	delete(g.servers, srv)
	g.mu.Unlock()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
