package client

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/gateway"
)

// subscription is one SUBSCRIBE of the client; it survives reconnects.
type subscription struct {
	c       *Client
	key     subKey
	handler facade.Handler
	opts    facade.SubscribeOptions // with defaults
	wire    json.RawMessage         // opts as sent

	ctx    context.Context // handlers' context, cancelled when stopping
	cancel context.CancelFunc
	wg     sync.WaitGroup // workers

	mu       sync.Mutex
	stopped  bool
	queue    []pendingEvent      // delivered, handler not started yet
	workers  int                 // goroutines running work
	busy     int                 // workers inside a handler
	inflight map[string]delivery // ManualAck deliveries by id
	stopOnce sync.Once
	stopErr  error
}

type pendingEvent struct {
	cn       *conn
	f        *gateway.Frame
	received time.Time
}

type delivery struct {
	cn      *conn
	attempt int
}

func (s *subscription) frame() *gateway.Frame {
	return &gateway.Frame{Op: gateway.OpSubscribe, Topic: s.key.topic, Group: s.key.group, Opts: s.wire}
}

// Subscribe implements [facade.Subscriber] over the gateway: it returns once
// the gateway confirmed the subscription. Handlers run concurrently (up to
// opts.MaxInFlight; the gateway's own window may be smaller); returning nil
// sends ACK, an error sends NACK with its text, unless opts.ManualAck. A
// Filter runs here: events it rejects are acknowledged without calling the
// handler. One client holds at most one subscription per topic and group
// (a second one is an error matching gateway.ErrAlreadySubscribed).
func (c *Client) Subscribe(ctx context.Context, topic, group string, handler facade.Handler, opts facade.SubscribeOptions) (facade.Unsubscribe, error) {
	if handler == nil {
		return nil, fmt.Errorf("%w: nil handler", facade.ErrInvalidOption)
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if topic == "" && len(opts.Topics) > 0 {
		topic, opts.Topics = opts.Topics[0], opts.Topics[1:]
	}
	if err := facade.ValidateTopic(topic); err != nil {
		return nil, err
	}
	if err := facade.ValidateGroup(group); err != nil {
		return nil, err
	}
	wireOpts := opts
	wireOpts.Filter, wireOpts.ManualAck = nil, false
	var wire json.RawMessage
	if b, err := json.Marshal(wireOpts); err == nil && string(b) != "{}" {
		wire = b
	}
	opts = opts.WithDefaults()
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &subscription{
		c: c, key: subKey{topic, group}, handler: handler, opts: opts, wire: wire,
		ctx: sctx, cancel: cancel,
		inflight: make(map[string]delivery),
	}
	c.mu.Lock()
	if c.fatal != nil {
		err := c.fatal
		c.mu.Unlock()
		cancel()
		return nil, err
	}
	if c.subs[s.key] != nil {
		c.mu.Unlock()
		cancel()
		return nil, fmt.Errorf("%w: %s/%s", gateway.ErrAlreadySubscribed, topic, group)
	}
	c.subs[s.key] = s
	c.mu.Unlock()
	if _, err := c.call(ctx, s.frame()); err != nil {
		c.mu.Lock()
		if c.subs[s.key] == s {
			delete(c.subs, s.key)
		}
		c.mu.Unlock()
		s.stopDispatch()
		s.wg.Wait()
		return nil, err
	}
	return s.stop, nil
}

// stopDispatch cancels the handlers' context and lets no new delivery in.
func (s *subscription) stopDispatch() {
	s.cancel()
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}

// stop is the subscription's Unsubscribe: handlers are cancelled and
// awaited (their ACK / NACK go out first), then UNSUBSCRIBE makes the
// gateway hand every event still leased back to the group.
func (s *subscription) stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.stopDispatch()
		c := s.c
		c.mu.Lock()
		if c.subs[s.key] == s {
			delete(c.subs, s.key)
		}
		c.mu.Unlock()
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.stopErr = ctx.Err()
			return
		}
		_, err := c.call(ctx, &gateway.Frame{Op: gateway.OpUnsubscribe, Topic: s.key.topic, Group: s.key.group})
		switch {
		case err == nil:
		case isGone(err):
			// Disconnected or closed: the gateway already handed
			// everything back.
		default:
			s.stopErr = err
		}
	})
	return s.stopErr
}

func isGone(err error) bool {
	return errorsIs(err, facade.ErrNotSubscribed) || errorsIs(err, facade.ErrUnavailable) || errorsIs(err, facade.ErrClosed)
}

// dispatch runs on the connection's reader goroutine: it starts the
// handler of one EVENT and never blocks.
func (c *Client) dispatch(cn *conn, f *gateway.Frame) {
	if f.Event == nil || f.Ctx == nil {
		c.log.Warn("EVENT without event or ctx", "topic", f.Topic, "group", f.Group)
		return
	}
	received := time.Now()
	c.mu.Lock()
	s := c.subs[subKey{f.Topic, f.Group}]
	c.mu.Unlock()
	if s == nil {
		return // unsubscribing: the gateway hands it back
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	if s.opts.ManualAck {
		s.inflight[f.Event.ID] = delivery{cn: cn, attempt: f.Ctx.Attempt}
	}
	s.queue = append(s.queue, pendingEvent{cn, f, received})
	// Start a worker when the queued events outnumber the workers that are
	// about to take one, up to MaxInFlight running handlers.
	if len(s.queue) > s.workers-s.busy && s.workers < s.opts.MaxInFlight {
		s.workers++
		s.wg.Add(1)
		go s.work()
	}
	s.mu.Unlock()
}

// work runs handlers for queued events, oldest first, and exits when the
// queue is empty. Workers, not a goroutine per event: handlers start in
// delivery order and a burst costs few goroutines.
func (s *subscription) work() {
	defer s.wg.Done()
	s.mu.Lock()
	for {
		if len(s.queue) == 0 || s.stopped {
			// Events left when stopping are handed back by the gateway
			// (UNSUBSCRIBE, close).
			s.workers--
			if len(s.queue) == 0 {
				s.queue = s.queue[:0:0]
			}
			s.mu.Unlock()
			return
		}
		p := s.queue[0]
		s.queue[0] = pendingEvent{}
		s.queue = s.queue[1:]
		s.busy++
		s.mu.Unlock()
		s.run(p.cn, p.f, p.received)
		s.mu.Lock()
		s.busy--
	}
}

func (s *subscription) run(cn *conn, f *gateway.Frame, received time.Time) {
	e := f.Event
	dc := facade.DeliveryContext{
		Group:       s.key.group,
		Attempt:     f.Ctx.Attempt,
		MaxAttempts: s.opts.MaxAttempts,
		AckDeadline: received.Add(time.Duration(f.Ctx.AckDeadlineMs) * time.Millisecond),
	}
	var err error
	if s.opts.Filter == nil || s.opts.Filter(e) {
		err = s.call(e, dc)
		if err == nil && s.opts.ManualAck {
			return // the caller acks
		}
	}
	if s.opts.ManualAck {
		s.mu.Lock()
		delete(s.inflight, e.ID)
		s.mu.Unlock()
	}
	op, reason := gateway.OpAck, ""
	if err != nil {
		op, reason = gateway.OpNack, truncate(err.Error(), 1024)
	}
	b := gateway.AppendAck(nil, op, "", f.Topic, f.Group, e.ID, f.Ctx.Attempt, reason, 0)
	// Not s.ctx: an unsubscribe cancels it but still wants this ACK sent
	// before its UNSUBSCRIBE.
	if err := cn.send(context.Background(), b); err != nil {
		s.c.log.Debug("ack not sent", "id", e.ID, "err", err)
	}
}

// call runs the handler, turning a panic into an error.
func (s *subscription) call(e *facade.EventRecord, dc facade.DeliveryContext) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
			s.c.log.Error("handler panic", "topic", s.key.topic, "group", s.key.group, "id", e.ID, "panic", r)
		}
	}()
	return s.handler(s.ctx, e, dc)
}

// take returns and forgets the ManualAck delivery of id, if it is known.
func (c *Client) take(topic, group, id string) (delivery, bool) {
	c.mu.Lock()
	s := c.subs[subKey{topic, group}]
	c.mu.Unlock()
	if s == nil {
		return delivery{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.inflight[id]
	delete(s.inflight, id)
	return d, ok
}

func (c *Client) peek(topic, group, id string) (delivery, bool) {
	c.mu.Lock()
	s := c.subs[subKey{topic, group}]
	c.mu.Unlock()
	if s == nil {
		return delivery{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.inflight[id]
	return d, ok
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
