package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/wire"
)

// subscription is one SUBSCRIBE of the client; it survives reconnects.
type subscription struct {
	c       *Client
	key     subKey
	handler facade.Handler
	opts    facade.SubscribeOptions // with defaults
	rawOpts json.RawMessage         // opts as sent

	ctx    context.Context // handlers' context, cancelled when stopping
	cancel context.CancelFunc
	wg     sync.WaitGroup // workers

	mu       sync.Mutex
	stopped  bool
	draining bool
	queue    []*delivery            // delivered, handler not started yet
	workers  int                    // goroutines running work
	busy     int                    // workers inside a handler
	held     map[*delivery]struct{} // dispatched and not settled
	idle     chan struct{}
	stopOnce sync.Once
	// gone: UNSUBSCRIBE sent or the subscription ended, its leases
	// handed back.
	gone    atomic.Bool
	stopErr error

	done  chan struct{} // closed when the subscription ended
	ended sync.Once
	err   error // why it ended on its own; set before done closes
}

var _ facade.Subscription = (*subscription)(nil)

func (s *subscription) frame() *wire.Frame {
	return &wire.Frame{Op: wire.OpSubscribe, Topic: s.key.topic, Group: s.key.group, Opts: s.rawOpts}
}

// Subscribe implements [facade.Subscriber] over the gateway: it returns once
// the gateway confirmed the subscription. Handlers run concurrently (up to
// opts.MaxInFlight; the gateway's own window may be smaller); returning nil
// sends ACK, an error sends NACK with its text, unless opts.ManualAck. A
// Filter runs here: events it rejects are acknowledged without calling the
// handler. One client holds at most one subscription per topic and group
// (a second one is an error matching wire.ErrAlreadySubscribed).
//
// The subscription ends on its own (Done, Err) when the client closes or
// gives up, or when the gateway ends it (new credentials without the
// right to it: Err wraps facade.ErrForbidden).
func (c *Client) Subscribe(ctx context.Context, topic, group string, handler facade.Handler, opts facade.SubscribeOptions) (facade.Subscription, error) {
	if handler == nil {
		return nil, fmt.Errorf("%w: nil handler", facade.ErrInvalidOption)
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if topic == "" && len(opts.Topics) > 0 {
		topic, opts.Topics = opts.Topics[0], opts.Topics[1:]
	}
	if err := facade.ValidatePattern(topic); err != nil {
		return nil, err
	}
	if err := facade.ValidateGroup(group); err != nil {
		return nil, err
	}
	wireOpts := opts
	wireOpts.Filter, wireOpts.ManualAck = nil, false
	var rawOpts json.RawMessage
	if b, err := json.Marshal(wireOpts); err == nil && string(b) != "{}" {
		rawOpts = b
	}
	opts = opts.WithDefaults()
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &subscription{
		c: c, key: subKey{topic, group}, handler: handler, opts: opts, rawOpts: rawOpts,
		ctx: sctx, cancel: cancel,
		idle: make(chan struct{}, 1),
		done: make(chan struct{}),
		held: make(map[*delivery]struct{}),
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
		return nil, fmt.Errorf("%w: %s/%s", wire.ErrAlreadySubscribed, topic, group)
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
	return s, nil
}

// Done implements [facade.Subscription].
func (s *subscription) Done() <-chan struct{} { return s.done }

// Err implements [facade.Subscription].
func (s *subscription) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// end marks the subscription ended; cause is why it ended on its own
// (nil after Stop or Drain).
func (s *subscription) end(cause error) {
	s.ended.Do(func() {
		s.err = cause
		close(s.done)
	})
}

// endedBy ends a subscription that the client or the gateway ended: its
// handlers are cancelled and its unsettled deliveries were handed back by
// the gateway.
func (s *subscription) endedBy(cause error) {
	s.stopDispatch()
	s.gone.Store(true)
	go func() {
		s.wg.Wait()
		s.end(cause)
	}()
}

// stopDispatch cancels the handlers' context and lets no new delivery in.
func (s *subscription) stopDispatch() {
	s.cancel()
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}

// Stop implements [facade.Subscription]: handlers are cancelled and
// awaited (their ACK / NACK go out first), then UNSUBSCRIBE makes the
// gateway hand every event still leased back to the group.
func (s *subscription) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		defer s.end(nil)
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
		s.gone.Store(true)
		_, err := c.call(ctx, &wire.Frame{Op: wire.OpUnsubscribe, Topic: s.key.topic, Group: s.key.group})
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

// Drain implements [facade.Subscription]: events that arrive from now on
// are not handed to the handler; once every delivery handed out is settled
// (or ctx ends), Stop runs, and the gateway hands the events that arrived
// meanwhile back to the group (each counts as a delivery attempt).
func (s *subscription) Drain(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	for {
		// Deliveries whose lease ended unsettled were handed back by the
		// gateway: they no longer hold the drain up.
		now := time.Now()
		var next time.Time
		s.mu.Lock()
		for d := range s.held {
			dl := d.Deadline()
			if !dl.After(now) {
				delete(s.held, d)
				continue
			}
			if next.IsZero() || dl.Before(next) {
				next = dl
			}
		}
		s.mu.Unlock()
		if next.IsZero() {
			return s.Stop(ctx)
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-s.idle:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errors.Join(ctx.Err(), s.Stop(context.WithoutCancel(ctx)))
		}
		t.Stop()
	}
}

func isGone(err error) bool {
	return errorsIs(err, wire.ErrNotSubscribed) || errorsIs(err, facade.ErrUnavailable) || errorsIs(err, facade.ErrClosed)
}

// dispatch runs on the connection's reader goroutine: it starts the
// handler of one EVENT of a group (read hands live ones to deliverLive)
// and never blocks.
// f is the reader's frame: what the delivery keeps is copied out of it.
// received is when the message holding it was read.
func (c *Client) dispatch(cn *conn, f *wire.Frame, received time.Time) {
	if f.Event == nil || f.Ctx == nil {
		c.log.Warn("EVENT without event or ctx", "topic", f.Topic, "group", f.Group)
		return
	}
	c.mu.Lock()
	s := c.subs[subKey{f.Topic, f.Group}]
	c.mu.Unlock()
	if s == nil {
		return // unsubscribing: the gateway hands it back
	}
	s.mu.Lock()
	if s.stopped || s.draining {
		s.mu.Unlock()
		return // handed back by the gateway when the subscription stops
	}
	// One allocation holds the delivery and its event.
	d := &delivery{s: s, cn: cn, ev: *f.Event, attempt: f.Ctx.Attempt, deadline: received.Add(time.Duration(f.Ctx.AckDeadlineMs) * time.Millisecond)}
	d.ev.Trace = f.Ctx.Trace
	s.held[d] = struct{}{}
	s.queue = append(s.queue, d)
	s.startWorkerLocked()
	s.mu.Unlock()
}

// startWorkerLocked starts a worker for the queued events when no worker
// is free to take them (every one is inside a handler), up to MaxInFlight
// running handlers; ManualAck handlers run one at a time, in stream order,
// as facade.Handler says. A worker that takes an event with more queued
// behind it calls it again, so that a burst gets as many workers as its
// handlers keep busy, not one per event. s.mu held.
func (s *subscription) startWorkerLocked() {
	workers := s.opts.MaxInFlight
	if s.opts.ManualAck {
		workers = 1
	}
	if len(s.queue) > 0 && s.workers == s.busy && s.workers < workers {
		s.workers++
		s.wg.Add(1)
		go s.work()
	}
}

// deliverLive hands a live EVENT of topic to its follower, on the
// connection's reader goroutine.
func (c *Client) deliverLive(topic string, e *facade.EventRecord) {
	c.mu.Lock()
	l := c.lives[topic]
	c.mu.Unlock()
	if l != nil {
		l.deliver(e)
	}
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
		d := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.busy++
		s.startWorkerLocked()
		s.mu.Unlock()
		s.run(d)
		s.mu.Lock()
		s.busy--
	}
}

func (s *subscription) run(d *delivery) {
	var err error
	if s.opts.Filter == nil || s.opts.Filter(&d.ev) {
		err = s.call(d)
		if err == nil && s.opts.ManualAck {
			return // the caller settles it
		}
	}
	op, reason := wire.OpAck, ""
	if err != nil {
		op, reason = wire.OpNack, truncate(err.Error(), 1024)
	}
	// Not s.ctx: an unsubscribe cancels it but still wants this ACK sent
	// before its UNSUBSCRIBE. Fire and forget: a lost ACK is a redelivery.
	_ = d.settle(context.Background(), op, reason, false)
}

// call runs the handler, turning a panic into an error.
func (s *subscription) call(d *delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
			s.c.log.Error("handler panic", "topic", s.key.topic, "group", s.key.group, "id", d.ev.ID, "panic", r)
		}
	}()
	ctx := s.ctx
	if tc := d.ev.Trace; tc != nil {
		ctx = facade.ContextWithTrace(ctx, *tc) // the hub's deliver span is the handler's parent
	}
	return s.handler(ctx, d)
}

// settled counts d as settled.
func (s *subscription) settled(d *delivery) {
	s.mu.Lock()
	delete(s.held, d)
	draining := s.draining
	s.mu.Unlock()
	if draining {
		select {
		case s.idle <- struct{}{}:
		default:
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
