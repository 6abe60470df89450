package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/wsbatch"
	"github.com/eventhub/eventhub/wire"
)

var _ facade.Bus = (*Client)(nil)

// Client is a [facade.Bus] over the gateway's WebSocket protocol. It is safe
// for concurrent use.
//
// It keeps one connection open, reconnecting with backoff when it drops and
// subscribing again to everything it was subscribed to. Calls in progress
// when a connection drops fail with an error wrapping
// [facade.ErrUnavailable]; calls made while reconnecting wait for the new
// connection until their ctx (or Config.RequestTimeout) expires.
type Client struct {
	url    string
	cfg    Config
	log    *slog.Logger
	dialer websocket.Dialer
	corr   atomic.Uint64
	gen    atomic.Uint64

	mu    sync.Mutex
	cur   *conn         // nil while disconnected
	ready chan struct{} // closed when cur is set, or the client closed or failed
	subs  map[subKey]*subscription
	lives map[string]*follow // live subscriptions by topic
	fatal error              // set when the client gave up (closed, or refused on reconnect)
	done  chan struct{}
	// life is cancelled by Close: it bounds reconnect attempts.
	life    context.Context
	endLife context.CancelFunc

	wg sync.WaitGroup // supervisor
}

type subKey struct{ topic, group string }

// Dial connects to the gateway at url (ws://host:port or wss://…), sends
// AUTH with cfg.Token and returns once the gateway accepted it. A refused
// token is an error matching [wire.ErrBadToken] (code bad_token); a
// gateway that cannot be reached, one wrapping [facade.ErrUnavailable].
func Dial(ctx context.Context, url string, cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	life, endLife := context.WithCancel(context.Background())
	c := &Client{
		life: life, endLife: endLife,
		url:   url,
		cfg:   cfg,
		log:   cfg.Logger,
		subs:  make(map[subKey]*subscription),
		lives: make(map[string]*follow),
		done:  make(chan struct{}),
		dialer: websocket.Dialer{
			HandshakeTimeout: cfg.HandshakeTimeout,
			NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				nc, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &wsbatch.Conn{Conn: nc}, nil
			},
		},
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	cn, err := c.connect(ctx)
	if err != nil {
		endLife()
		return nil, err
	}
	c.cur = cn
	c.ready = make(chan struct{})
	close(c.ready)
	c.wg.Go(func() { c.supervise(cn) })
	return c, nil
}

func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.cfg.RequestTimeout)
}

// connect dials and authenticates one connection.
func (c *Client) connect(ctx context.Context) (*conn, error) {
	ws, resp, err := c.dialer.DialContext(ctx, c.url, c.cfg.Header)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("%w: dial %s: %s: %w", facade.ErrUnavailable, c.url, resp.Status, err)
		}
		return nil, fmt.Errorf("%w: dial %s: %w", facade.ErrUnavailable, c.url, err)
	}
	cn := newConn(c, ws, c.gen.Add(1))
	if _, err := cn.request(ctx, &wire.Frame{Op: wire.OpAuth, Token: c.cfg.Token, Batch: !c.cfg.NoBatch}); err != nil {
		cn.close(websocket.CloseNormalClosure, "")
		cn.wait()
		return nil, err
	}
	// The gateway takes batches from the OK of AUTH on.
	cn.batch.Store(!c.cfg.NoBatch)
	return cn, nil
}

// supervise reconnects when cn dies, until the client closes.
func (c *Client) supervise(cn *conn) {
	for {
		select {
		case <-c.done:
			return
		case <-cn.dead:
		}
		cn.wait()
		c.mu.Lock()
		c.cur = nil
		c.ready = make(chan struct{})
		c.mu.Unlock()
		if err := terminal(cn.err()); err != nil || c.cfg.NoReconnect {
			if err == nil {
				err = fmt.Errorf("%w: connection lost: %w", facade.ErrUnavailable, cn.err())
			}
			c.log.Warn("not reconnecting", "err", err)
			c.giveUp(err)
			return
		}
		c.log.Info("connection lost; reconnecting", "err", cn.err())
		var ok bool
		if cn, ok = c.reconnect(); !ok {
			return
		}
	}
}

// reconnect dials with backoff and resubscribes. false: the client closed or
// gave up.
func (c *Client) reconnect() (*conn, bool) {
	delay := c.cfg.ReconnectMin
	for {
		jitter := time.Duration(rand.Int64N(int64(delay)/2 + 1))
		select {
		case <-c.done:
			return nil, false
		case <-time.After(delay/2 + jitter):
		}
		delay = min(2*delay, c.cfg.ReconnectMax)
		ctx, cancel := context.WithTimeout(c.life, c.cfg.HandshakeTimeout+c.cfg.RequestTimeout)
		cn, err := c.connect(ctx)
		if err == nil {
			err = c.resubscribe(ctx, cn)
		}
		cancel()
		if err != nil {
			if t := terminal(err); t != nil {
				c.giveUp(t)
				return nil, false
			}
			if cn != nil {
				cn.close(websocket.CloseNormalClosure, "")
				cn.wait()
			}
			c.log.Debug("reconnect failed", "err", err)
			continue
		}
		c.mu.Lock()
		select {
		case <-c.done:
			c.mu.Unlock()
			cn.close(websocket.CloseNormalClosure, "")
			cn.wait()
			return nil, false
		default:
		}
		c.cur = cn
		close(c.ready)
		c.mu.Unlock()
		c.log.Info("reconnected")
		return cn, true
	}
}

func (c *Client) resubscribe(ctx context.Context, cn *conn) error {
	c.mu.Lock()
	subs := make([]*subscription, 0, len(c.subs))
	for _, s := range c.subs {
		subs = append(subs, s)
	}
	c.mu.Unlock()
	for _, s := range subs {
		if _, err := cn.request(ctx, s.frame()); err != nil && !errors.Is(err, wire.ErrAlreadySubscribed) {
			return fmt.Errorf("resubscribe %s/%s: %w", s.key.topic, s.key.group, err)
		}
	}
	c.mu.Lock()
	lives := make([]*follow, 0, len(c.lives))
	for _, f := range c.lives {
		if f.established.Load() { // Follow sends the others itself
			lives = append(lives, f)
		}
	}
	c.mu.Unlock()
	for _, f := range lives {
		r, err := cn.request(ctx, f.frame(0, false))
		if err != nil && !errors.Is(err, wire.ErrAlreadySubscribed) {
			return fmt.Errorf("follow %s again: %w", f.topic, err)
		}
		if err == nil {
			f.checkRecovered(r)
		}
	}
	return nil
}

// terminal returns the error to give up with when err means reconnecting
// cannot help: credentials refused or expired.
func terminal(err error) error {
	var ce *websocket.CloseError
	if errors.As(err, &ce) && ce.Code >= 4500 && ce.Code <= 4999 {
		code := ce.Text
		if code == "" {
			code = "closed"
		}
		return &facade.Error{Code: code, Msg: fmt.Sprintf("gateway closed the connection (%d)", ce.Code)}
	}
	var fe *facade.Error
	if errors.As(err, &fe) && (fe.Code == wire.CodeBadToken || fe.Code == wire.CodeTokenExpired || fe.Code == wire.CodeForbidden) {
		return err
	}
	return nil
}

func (c *Client) giveUp(err error) {
	c.mu.Lock()
	if c.fatal == nil {
		c.fatal = err
	}
	select {
	case <-c.ready:
	default:
		close(c.ready)
	}
	subs := make([]*subscription, 0, len(c.subs))
	for _, s := range c.subs {
		subs = append(subs, s)
	}
	clear(c.subs)
	lives := c.takeLives()
	c.mu.Unlock()
	for _, s := range subs {
		s.endedBy(err)
	}
	for _, f := range lives {
		f.end(err)
	}
}

// takeLives empties the live subscriptions (c.mu held).
func (c *Client) takeLives() []*follow {
	lives := make([]*follow, 0, len(c.lives))
	for _, f := range c.lives {
		lives = append(lives, f)
	}
	clear(c.lives)
	return lives
}

// revoked ends the subscription that the gateway ended (an ERR naming its
// topic and group, sent when new credentials lack the right to it).
func (c *Client) revoked(f *wire.Frame) {
	c.mu.Lock()
	if f.Group == "" {
		l := c.lives[f.Topic]
		delete(c.lives, f.Topic)
		c.mu.Unlock()
		if l != nil {
			l.end(&facade.Error{Code: f.Code, Msg: f.Msg})
		}
		return
	}
	s := c.subs[subKey{f.Topic, f.Group}]
	if s != nil {
		delete(c.subs, s.key)
	}
	c.mu.Unlock()
	if s != nil {
		s.endedBy(&facade.Error{Code: f.Code, Msg: f.Msg})
	}
}

// live returns the current connection, waiting for one while reconnecting.
func (c *Client) live(ctx context.Context) (*conn, error) {
	for {
		c.mu.Lock()
		cn, ready, fatal := c.cur, c.ready, c.fatal
		c.mu.Unlock()
		switch {
		case fatal != nil:
			return nil, fatal
		case cn != nil:
			return cn, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: not connected: %w", facade.ErrUnavailable, ctx.Err())
		}
	}
}

// call sends f on the live connection and waits for its OK or ERR.
func (c *Client) call(ctx context.Context, f *wire.Frame) (*wire.Frame, error) {
	return c.callThen(ctx, f, nil)
}

// callThen is call with onOK as for [conn.requestThen].
func (c *Client) callThen(ctx context.Context, f *wire.Frame, onOK func()) (*wire.Frame, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	cn, err := c.live(ctx)
	if err != nil {
		return nil, err
	}
	return cn.requestThen(ctx, f, onOK)
}

// Close closes the connection (the gateway hands every unacknowledged event
// back), cancels the handlers' contexts and waits for them and for the
// client's goroutines. It is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		return nil
	default:
	}
	close(c.done)
	c.endLife()
	if c.fatal == nil {
		c.fatal = facade.ErrClosed
	}
	cn := c.cur
	subs := make([]*subscription, 0, len(c.subs))
	for _, s := range c.subs {
		subs = append(subs, s)
	}
	clear(c.subs)
	lives := c.takeLives()
	select {
	case <-c.ready:
	default:
		close(c.ready)
	}
	c.mu.Unlock()
	for _, s := range subs {
		s.stopDispatch()
	}
	if cn != nil {
		cn.close(websocket.CloseNormalClosure, "")
	}
	c.wg.Wait()
	if cn != nil {
		cn.wait()
	}
	for _, s := range subs {
		s.wg.Wait()
		s.end(fmt.Errorf("%w: the client closed", facade.ErrClosed))
	}
	for _, f := range lives {
		f.end(fmt.Errorf("%w: the client closed", facade.ErrClosed))
	}
	return nil
}

// conn is one WebSocket connection: a reader goroutine and a writer
// goroutine draining a bounded queue.
type conn struct {
	c   *Client
	ws  *websocket.Conn
	gen uint64
	out chan outFrame
	// dec decodes the gateway's frames (reader goroutine only).
	dec wire.Decoder
	// batch: the gateway takes batched frames from this client (the
	// writer coalesces what is queued).
	batch atomic.Bool

	mu      sync.Mutex
	pending map[string]waiter
	deadErr error
	dead    chan struct{} // closed when the connection is unusable

	closeOnce sync.Once
	wg        sync.WaitGroup
}

func newConn(c *Client, ws *websocket.Conn, gen uint64) *conn {
	cn := &conn{
		c: c, ws: ws, gen: gen,
		out:     make(chan outFrame, c.cfg.OutboundQueue),
		pending: make(map[string]waiter),
		dead:    make(chan struct{}),
	}
	// The read deadline is idle + idle/16 after a frame; see read.
	idle := c.cfg.IdleTimeout + c.cfg.IdleTimeout/16
	_ = ws.SetReadDeadline(time.Now().Add(idle))
	ws.SetPingHandler(func(data string) error {
		_ = ws.SetReadDeadline(time.Now().Add(idle))
		err := ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(c.cfg.WriteTimeout))
		if errors.Is(err, websocket.ErrCloseSent) {
			return nil
		}
		return err
	})
	cn.wg.Go(cn.read)
	cn.wg.Go(cn.write)
	return cn
}

// fail marks the connection dead with err (the first error wins) and fails
// the pending requests.
func (cn *conn) fail(err error) {
	cn.mu.Lock()
	select {
	case <-cn.dead:
		cn.mu.Unlock()
		return
	default:
	}
	cn.deadErr = err
	close(cn.dead)
	cn.pending = nil
	cn.mu.Unlock()
	_ = cn.ws.NetConn().Close()
}

func (cn *conn) err() error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.deadErr
}

// close sends a close frame and closes the connection.
func (cn *conn) close(code int, text string) {
	cn.closeOnce.Do(func() {
		_ = cn.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
		cn.fail(net.ErrClosed)
	})
}

func (cn *conn) wait() { cn.wg.Wait() }

func (cn *conn) read() {
	idle := cn.c.cfg.IdleTimeout
	// The read deadline moves at most every idle/16, to idle + idle/16
	// after the frame that moved it (pings move it too): a connection is
	// dropped between idle and idle + idle/16 after its last frame, without
	// a timer update on every frame.
	slack := idle / 16
	var refreshed time.Time
	var buf bytes.Buffer // reused: decoded frames do not alias it
	var in inFrame
	for {
		_, r, err := cn.ws.NextReader()
		if err == nil {
			buf.Reset()
			_, err = buf.ReadFrom(r)
		}
		if err != nil {
			cn.fail(err)
			return
		}
		data := buf.Bytes()
		if buf.Cap() > 1<<20 {
			buf = bytes.Buffer{}
		}
		in.received = time.Now()
		if in.received.Sub(refreshed) >= slack {
			refreshed = in.received
			_ = cn.ws.SetReadDeadline(in.received.Add(idle + slack))
		}
		if !wire.IsBatch(data) {
			cn.frame(data, &in)
			continue
		}
		if err := wire.SplitBatch(data, func(frame []byte) bool {
			cn.frame(frame, &in)
			return true
		}); err != nil {
			cn.c.log.Warn("undecodable batch from gateway", "err", err)
		}
	}
}

// inFrame is the reader's frame, decoded into again for every frame: what
// outlives a frame is copied out of it.
type inFrame struct {
	f        wire.Frame
	ev       facade.EventRecord
	ctx      wire.EventContext
	received time.Time // when the message holding it was read
}

// frame decodes and handles one frame from the gateway.
func (cn *conn) frame(data []byte, in *inFrame) {
	scratch := &in.f
	if err := cn.dec.DecodeEvent(data, scratch, &in.ev, &in.ctx); err != nil {
		cn.c.log.Warn("undecodable frame from gateway", "err", err)
		return
	}
	if scratch.Op == wire.OpEvent {
		if scratch.Group == "" && scratch.Event != nil {
			// A live event: only its record outlives this frame.
			e := new(facade.EventRecord)
			*e = *scratch.Event
			if scratch.Ctx != nil {
				e.Trace = scratch.Ctx.Trace
			}
			cn.c.deliverLive(scratch.Topic, e)
			return
		}
		cn.c.dispatch(cn, scratch, in.received)
		return
	}
	f := new(wire.Frame)
	*f = *scratch
	// Only EVENT frames carry an event; none points into the scratch.
	f.Event, f.Ctx = nil, nil
	switch f.Op {
	case wire.OpOK, wire.OpErr:
		if f.Corr == "" {
			if f.Op == wire.OpErr {
				cn.c.log.Warn("gateway error", "code", f.Code, "msg", f.Msg)
				if f.Topic != "" {
					cn.c.revoked(f)
				}
			}
			return
		}
		cn.mu.Lock()
		w := cn.pending[f.Corr]
		delete(cn.pending, f.Corr)
		cn.mu.Unlock()
		if w.onOK != nil && f.Op == wire.OpOK {
			w.onOK()
		}
		if w.ch != nil {
			w.ch <- f
		}
	}
}

// outFrame is a frame queued for the writer: its bytes, or, when b is nil,
// the ACK of ack, which the writer encodes into the message it goes out in
// (no allocation per ACK).
type outFrame struct {
	b   []byte
	ack *delivery
}

func (cn *conn) write() {
	wt := cn.c.cfg.WriteTimeout
	bc, _ := cn.ws.NetConn().(*wsbatch.Conn)
	var msg [][]byte // the frames of the next message
	var acks []byte  // the ACKs encoded for msg
	ident := func(b []byte) []byte { return b }
	encode := func(of outFrame) []byte {
		if of.b != nil {
			return of.b
		}
		d := of.ack
		start := len(acks)
		acks = wire.AppendAck(acks, wire.OpAck, "", d.s.key.topic, d.s.key.group, d.ev.ID, d.attempt, "", 0)
		return acks[start:len(acks):len(acks)]
	}
	for {
		var of outFrame
		select {
		case of = <-cn.out:
		case <-cn.dead:
			return
		}
		_ = cn.ws.SetWriteDeadline(time.Now().Add(wt))
		if bc != nil {
			bc.Hold()
		}
		coalesce := cn.batch.Load()
		acks = acks[:0]
		b := encode(of)
		msg = append(msg[:0], b)
		size := len(b) + 2
		yielded := false
		for {
			of, ok := cn.poll(&yielded)
			if !ok {
				break
			}
			next := encode(of)
			if coalesce && len(msg) < wire.BatchMaxFrames && size+len(next)+1 <= wire.BatchMaxBytes {
				msg = append(msg, next)
				size += len(next) + 1
				continue
			}
			if err := wsbatch.WriteFrames(cn.ws, msg, ident); err != nil {
				cn.fail(err)
				return
			}
			// next may be in acks: it stays, the ACKs before it were
			// written.
			msg = append(msg[:0], next)
			size = len(next) + 2
			if bc != nil && bc.Buffered() >= wsbatch.FlushBytes {
				break
			}
		}
		err := wsbatch.WriteFrames(cn.ws, msg, ident)
		clear(msg)
		if cap(acks) > 64<<10 {
			acks = nil
		}
		if err != nil {
			cn.fail(err)
			return
		}
		if bc != nil {
			if err := bc.Release(); err != nil {
				cn.fail(err)
				return
			}
		}
	}
}

// poll takes the next queued frame without waiting; the first time the
// queue is found empty (yielded false) it first lets running handlers add
// their ACKs to this write.
func (cn *conn) poll(yielded *bool) (outFrame, bool) {
	select {
	case of := <-cn.out:
		return of, true
	default:
	}
	if *yielded {
		return outFrame{}, false
	}
	*yielded = true
	runtime.Gosched()
	select {
	case of := <-cn.out:
		return of, true
	default:
		return outFrame{}, false
	}
}

// answer turns a reply frame into the request's result: an ERR is a
// *facade.Error with the frame's code.
func answer(r *wire.Frame) (*wire.Frame, error) {
	if r.Op == wire.OpErr {
		return r, &facade.Error{Code: r.Code, Msg: r.Msg, RetryAfter: time.Duration(r.RetryAfterMs) * time.Millisecond}
	}
	return r, nil
}

// send queues b, waiting while the queue is full.
func (cn *conn) send(ctx context.Context, b []byte) error {
	return cn.sendFrame(ctx, outFrame{b: b})
}

// sendFrame queues of, waiting while the queue is full.
func (cn *conn) sendFrame(ctx context.Context, of outFrame) error {
	select {
	case cn.out <- of:
		return nil
	case <-cn.dead:
		return fmt.Errorf("%w: connection lost: %w", facade.ErrUnavailable, cn.err())
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", facade.ErrUnavailable, ctx.Err())
	}
}

// waiter is a request awaiting its answer.
type waiter struct {
	ch   chan *wire.Frame
	onOK func() // run by the reader on an OK, before the frames after it
}

// request sends f with a fresh corr and waits for the OK (returned) or ERR
// (returned as a *facade.Error with the frame's code).
func (cn *conn) request(ctx context.Context, f *wire.Frame) (*wire.Frame, error) {
	return cn.requestThen(ctx, f, nil)
}

// requestThen is request with onOK run by the connection's reader when the
// answer is an OK, before it handles the next frame.
func (cn *conn) requestThen(ctx context.Context, f *wire.Frame, onOK func()) (*wire.Frame, error) {
	f.Corr = strconv.FormatUint(cn.c.corr.Add(1), 36)
	b, err := wire.Encode(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", facade.ErrBadPayload, err)
	}
	ch := make(chan *wire.Frame, 1)
	cn.mu.Lock()
	if cn.pending == nil {
		cn.mu.Unlock()
		return nil, fmt.Errorf("%w: connection lost: %w", facade.ErrUnavailable, cn.err())
	}
	cn.pending[f.Corr] = waiter{ch: ch, onOK: onOK}
	cn.mu.Unlock()
	forget := func() {
		cn.mu.Lock()
		delete(cn.pending, f.Corr)
		cn.mu.Unlock()
	}
	if err := cn.send(ctx, b); err != nil {
		forget()
		return nil, err
	}
	select {
	case r := <-ch:
		return answer(r)
	case <-cn.dead:
		// The answer and the close can arrive together (a refused AUTH is
		// answered, then the socket closed): the answer wins, and a close
		// that says why (bad_token, token_expired) is that error, not a
		// lost connection to retry.
		select {
		case r := <-ch:
			return answer(r)
		default:
		}
		if err := terminal(cn.err()); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: connection lost: %w", facade.ErrUnavailable, cn.err())
	case <-ctx.Done():
		forget()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w: no answer to %s: %w", facade.ErrUnavailable, f.Op, ctx.Err())
		}
		return nil, ctx.Err()
	}
}
