package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

// subscription is one member of a group on one topic.
type subscription struct {
	b     *Bus
	ti    *topicInfo
	group string
	opts  facade.SubscribeOptions
	// retry is the group's retry policy (defaults applied), as this
	// member last provisioned the group.
	retry   atomic.Pointer[facade.RetryPolicy]
	handler facade.Handler
	h       *subHandle // the Subscribe call's handle
	order   *keyOrder  // the key scheduler of an ordered group, else nil

	ctx      context.Context // handlers' context, cancelled when the subscription stops
	cancel   context.CancelFunc
	pullCtx  context.Context // cancelled when it stops pulling (Drain or stop)
	stopPull context.CancelFunc
	sem      chan struct{} // one slot per unsettled delivery
	// groupAckWait is the group's ack wait as this member last saw it
	// (it only grows): when it is longer than the member's own ack
	// timeout, an expired delivery is handed back at once.
	groupAckWait atomic.Int64
	done         chan struct{}  // closed when run returns
	hwg          sync.WaitGroup // handler calls dispatched and not returned
	obs          GroupObserver
	timed        bool // obs observes durations: worth reading the clock for

	pool workers // runs the handler calls

	mu       sync.Mutex
	held     map[uint64]*delivery // deliveries made and not settled, by stream sequence
	stopping bool                 // no handler starts any more (hwg is waited for)
	idle     chan struct{}        // signalled when a delivery is settled

	// queued bounds how long a message may have waited in the pull
	// buffer (see bufferClock), guarded by its own lock: nats.go runs
	// the callback on one goroutine, but a resumed pull loop may overlap
	// a late callback of the old one.
	queuedMu sync.Mutex
	queued   bufferClock

	// backs are the events handed back while the member stops and its
	// pull request may still stand (see handBack); backsDone once it is
	// withdrawn.
	backsMu   sync.Mutex
	backs     []jetstream.Msg
	backsDone bool

	stopOnce sync.Once
	stopErr  error
}

// subHandle is the [facade.Subscription] of one Subscribe call: one member
// per topic it reads.
type subHandle struct {
	subs    []*subscription
	done    chan struct{}
	release func() // the Guard's, when it ends

	mu   sync.Mutex
	left int   // members not yet stopped
	err  error // why it ended on its own
}

var _ facade.Subscription = (*subHandle)(nil)

// Stop implements [facade.Subscription].
func (h *subHandle) Stop(ctx context.Context) error {
	var errs []error
	for _, s := range h.subs {
		errs = append(errs, s.stop(ctx, nil))
	}
	return errors.Join(errs...)
}

// Drain implements [facade.Subscription].
func (h *subHandle) Drain(ctx context.Context) error {
	for _, s := range h.subs {
		s.stopPull()
	}
	var errs []error
	for _, s := range h.subs {
		errs = append(errs, s.drain(ctx))
	}
	return errors.Join(errs...)
}

// Done implements [facade.Subscription].
func (h *subHandle) Done() <-chan struct{} { return h.done }

// CheckGroupOptions reports, with [facade.ErrConflictingOption], whether
// o asks for a retry policy or an order other than the subscription's
// group has: what a process sharing one member of a group among several
// callers checks of every caller after the first.
func (h *subHandle) CheckGroupOptions(o facade.SubscribeOptions) error {
	for _, s := range h.subs {
		if p := o.Retry; p != nil {
			have := *s.retry.Load()
			if w := p.WithDefaults(s.b.cfg.RetryBackoff, s.b.cfg.MaxRetryBackoff); !w.Equal(have) {
				return retryConflict(w, have, s.group, s.ti.topic)
			}
		}
		if o.OrderBy != "" && o.OrderBy != s.orderBy() {
			return orderConflict(o.OrderBy, s.orderBy(), s.group, s.ti.topic)
		}
	}
	return nil
}

// Err implements [facade.Subscription].
func (h *subHandle) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// stopped counts one member out; cause, when not nil, is why it ended on
// its own.
func (h *subHandle) stopped(cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cause != nil && h.err == nil {
		h.err = cause
	}
	h.left--
	if h.left == 0 {
		if h.release != nil {
			h.release()
		}
		close(h.done)
	}
}

// orderBy is the order of s's group: "" or facade.OrderByKey.
func (s *subscription) orderBy() string {
	if s.order != nil {
		return facade.OrderByKey
	}
	return ""
}

// Subscribe implements [facade.Subscriber].
func (b *Bus) Subscribe(ctx context.Context, topic, group string, handler facade.Handler, opts facade.SubscribeOptions) (facade.Subscription, error) {
	if handler == nil {
		return nil, fmt.Errorf("%w: nil handler", facade.ErrInvalidOption)
	}
	if err := facade.ValidateGroup(group); err != nil {
		return nil, err
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.WithDefaults()
	topics := opts.Topics
	if topic != "" {
		topics = append([]string{topic}, topics...)
	}
	if len(topics) == 0 {
		return nil, fmt.Errorf("%w: no topic", facade.ErrBadTopic)
	}
	h := &subHandle{done: make(chan struct{})}
	if g := b.cfg.Guard; g != nil {
		release, err := g.Subscribe(ctx)
		if err != nil {
			return nil, err
		}
		h.release = release
	}
	seen := map[string]bool{}
	for _, t := range topics {
		if seen[t] {
			continue
		}
		seen[t] = true
		h.left++
		s, err := b.subscribeOne(ctx, t, group, handler, opts, h)
		if err != nil {
			h.left--
			_ = h.Stop(context.WithoutCancel(ctx))
			if len(h.subs) == 0 && h.release != nil {
				h.release() // no member started, none will count out
			}
			return nil, err
		}
		h.subs = append(h.subs, s)
	}
	return h, nil
}

func (b *Bus) subscribeOne(ctx context.Context, topic, group string, handler facade.Handler, opts facade.SubscribeOptions, h *subHandle) (*subscription, error) {
	ti, err := b.groupTopic(ctx, topic, true)
	if err != nil {
		return nil, err
	}
	cons, retry, err := b.ensureGroup(ctx, ti, group, opts)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	pctx, stopPull := context.WithCancel(sctx)
	s := &subscription{
		b: b, ti: ti, group: group, opts: opts, handler: handler, h: h,
		ctx: sctx, cancel: cancel, pullCtx: pctx, stopPull: stopPull,
		sem:  make(chan struct{}, opts.MaxInFlight),
		done: make(chan struct{}),
		held: make(map[uint64]*delivery),
		idle: make(chan struct{}, 1),
		obs:  b.cfg.Observer.Group(topic, group),
	}
	_, untimed := s.obs.(nopObserver)
	s.timed = !untimed
	s.groupAckWait.Store(int64(cons.CachedInfo().Config.AckWait))
	s.retry.Store(&retry)
	s.pool.init(s)
	if groupOrder(cons.CachedInfo().Config) == facade.OrderByKey {
		s.order = newKeyOrder(s)
	}

	b.subsMu.Lock()
	if b.closed {
		b.subsMu.Unlock()
		cancel()
		return nil, facade.ErrClosed
	}
	b.subs[s] = struct{}{}
	b.wg.Add(1)
	b.subsMu.Unlock()

	cc, err := s.consume(cons)
	if err != nil {
		s.unregister()
		b.wg.Done()
		cancel()
		if s.order != nil {
			s.order.wg.Wait()
		}
		s.flushHandBacks()
		return nil, err
	}
	go func() {
		defer b.wg.Done()
		s.run(cc)
	}()
	return s, nil
}

func (s *subscription) consume(cons jetstream.Consumer) (jetstream.ConsumeContext, error) {
	// A member never buffers more than its window: buffered events' ack
	// deadlines run while they wait for a slot.
	opts := []jetstream.PullConsumeOpt{
		jetstream.PullMaxMessages(s.opts.BatchSize),
		jetstream.PullExpiry(s.b.cfg.PullExpiry),
		jetstream.PullHeartbeat(s.b.cfg.PullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			s.b.log.Debug("consume", "topic", s.ti.topic, "group", s.group, "err", err)
			if s.order != nil && errors.Is(err, jetstream.ErrPinIDMismatch) {
				s.order.lostPin()
			}
		}),
	}
	if s.order != nil {
		opts = append(opts, jetstream.PullPriorityGroup(priorityGroup))
	}
	cc, err := cons.Consume(s.onMsg, opts...)
	if err != nil {
		return nil, fmt.Errorf("consume %s/%s: %w", s.ti.topic, s.group, translate(err))
	}
	return cc, nil
}

// run supervises the pull loop: when it ends on its own (the consumer was
// deleted, the connection closed) it provisions the group again and resumes.
func (s *subscription) run(cc jetstream.ConsumeContext) {
	defer close(s.done)
	defer s.flushHandBacks() // the pull request is withdrawn now
	backoff := 100 * time.Millisecond
	for {
		if cc != nil {
			select {
			case <-s.pullCtx.Done():
				cc.Drain()
				<-cc.Closed()
				return
			case <-cc.Closed():
				if s.b.nc.IsClosed() {
					// Nothing to resume on: the subscription ends, visibly.
					s.b.wg.Go(func() {
						_ = s.stop(context.Background(), fmt.Errorf("%w: the connection closed", facade.ErrClosed))
					})
					return
				}
				s.b.log.Warn("pull loop ended; resuming", "topic", s.ti.topic, "group", s.group)
			}
		}
		select {
		case <-s.pullCtx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
		cc = nil
		// A group created again meanwhile (deleted by an operator) has
		// its new creator's retry policy: a member that set none follows
		// it, one that asked for another is refused (and logs, and tries
		// again).
		cons, retry, err := s.b.ensureGroup(s.pullCtx, s.ti, s.group, s.opts)
		if err == nil {
			s.groupAckWait.Store(int64(cons.CachedInfo().Config.AckWait))
			s.retry.Store(&retry)
			cc, err = s.consume(cons)
		}
		if err != nil {
			s.b.log.Warn("resume group", "topic", s.ti.topic, "group", s.group, "err", err)
			continue
		}
		backoff = 100 * time.Millisecond
	}
}

// onMsg runs on the pull loop's goroutine, one message at a time.
func (s *subscription) onMsg(msg jetstream.Msg) {
	var meta jetstream.MsgMetadata
	if !ackMeta(msg.Reply(), &meta) {
		_, err := msg.Metadata()
		s.b.log.Error("message without metadata", "topic", s.ti.topic, "err", err)
		return
	}
	key := keyOf(&meta)
	if s.pullCtx.Err() != nil {
		// Stopping: hand buffered events back, uncounted.
		s.handBack(msg, key)
		return
	}
	if s.order != nil {
		m := meta
		s.order.takeOver(s.pullCtx, msg, &m)
	}
	t0 := time.Now()
	s.queuedMu.Lock()
	queued := s.queued.sum
	s.queuedMu.Unlock()
	var end time.Time // when the callback ends, if known before it returns
	defer func() {
		if end.IsZero() {
			end = time.Now()
		}
		s.queuedMu.Lock()
		s.queued.add(end.Sub(t0), s.opts.BatchSize)
		s.queuedMu.Unlock()
	}()
	rec := fromMsg(msg.Subject(), msg.Headers(), msg.Data(), meta.Sequence.Stream, meta.Timestamp)
	d := &delivery{s: s, msg: msg, rec: rec, key: key, attempt: s.b.released.attempt(&meta), hidx: -1}
	if d.attempt > s.opts.MaxAttempts {
		// The last attempt's deadline passed.
		if s.order != nil {
			s.order.arrived(rec.Seq, rec.Key)
		}
		s.deadLetter(d, "ack deadline passed on the last attempt")
		return
	}
	if (s.ti.match != nil && !s.ti.match(rec.Topic)) || (s.opts.Filter != nil && !s.opts.Filter(rec)) {
		if s.order != nil {
			s.order.arrived(rec.Seq, rec.Key)
		}
		_ = msg.Ack()
		return
	}
	s.obs.Delivered()
	s.startDeliver(d)
	if s.order != nil {
		s.order.add(d)
		return
	}
	if !s.admit(d) {
		d.endSpan("handed_back")
		s.handBack(msg, key) // stopping before it reached the handler
		return
	}
	now := time.Now()
	waited := now.Sub(t0)
	s.obs.Waited(waited)
	if queued+waited > s.opts.AckTimeout()/10 {
		// Its ack clock may have run for long while it waited in the
		// pull buffer behind slow callbacks (a ManualAck handler that
		// waits for room, as the gateway's does) or for a slot here:
		// start it again, so the handler gets the whole ack timeout.
		_ = msg.InProgress()
	}
	deadline := now.Add(s.opts.AckTimeout())
	d.deadline = deadline // not shared yet
	d.store = now.Add(time.Duration(s.groupAckWait.Load()))
	if s.opts.ManualAck {
		s.b.expiry.move(d, deadline)
		// A ManualAck handler only receives the delivery (it is settled
		// later), so it runs here, one at a time in stream order: what a
		// WebSocket subscription needs to send EVENTs in order.
		s.handle(d)
		return
	}
	s.mu.Lock()
	if s.stopping {
		// nats.go may still run this callback after the pull loop
		// closed; the handlers are being waited for: hand it back.
		s.mu.Unlock()
		if d.finish(handedOff) == nil {
			d.endSpan("handed_back")
			s.handBack(msg, key)
		}
		return
	}
	s.hwg.Add(1)
	s.mu.Unlock()
	end = now // the rest of the callback is short beside a wait for a slot
	s.dispatch(d)
}

// dispatch runs d's handler on one of s's workers. The caller counted d
// in s.hwg.
func (s *subscription) dispatch(d *delivery) {
	s.pool.submit(d)
}

// admit takes a slot for d, waiting while MaxInFlight deliveries are out.
// A redelivery of an event this member still holds takes over the old
// delivery's slot: the old one's lease ended at the store (settling it
// reports ErrExpired), and nothing is sent for it, since acks and naks
// name the stream sequence that the new delivery now owns.
func (s *subscription) admit(d *delivery) bool {
	s.mu.Lock()
	if old := s.held[d.rec.Seq]; old != nil {
		s.held[d.rec.Seq] = d
		s.mu.Unlock()
		old.supersede()
		return true
	}
	select {
	case s.sem <- struct{}{}: // a free slot: no second round on the lock
		s.held[d.rec.Seq] = d
		s.mu.Unlock()
		s.obs.InFlight(1)
		return true
	default:
	}
	s.mu.Unlock()
	select {
	case s.sem <- struct{}{}:
	case <-s.pullCtx.Done():
		return false
	}
	s.mu.Lock()
	s.held[d.rec.Seq] = d
	s.mu.Unlock()
	s.obs.InFlight(1)
	return true
}

// release frees d's slot once it is settled.
func (s *subscription) release(d *delivery) {
	s.mu.Lock()
	ok := s.held[d.rec.Seq] == d
	if ok {
		delete(s.held, d.rec.Seq)
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	<-s.sem
	s.obs.InFlight(-1)
	select {
	case s.idle <- struct{}{}:
	default:
	}
}

func (s *subscription) handle(d *delivery) {
	s.settle(d, s.timedCall(d))
}

// timedCall runs d's handler and observes how long it took.
func (s *subscription) timedCall(d *delivery) error {
	if !s.timed {
		return s.call(d)
	}
	t0 := time.Now()
	err := s.call(d)
	s.obs.Handled(time.Since(t0))
	return err
}

// settle acks or nacks d as its handler's err says (a ManualAck handler
// that returned nil leaves it to the caller).
func (s *subscription) settle(d *delivery, err error) {
	if s.opts.ManualAck && err == nil {
		return // the caller settles it
	}
	if err == nil {
		_ = d.Ack(s.ctx) // settled already by the handler, or a lost ack: at least once
		return
	}
	_ = d.Nack(s.ctx, err.Error())
}

// call runs the handler, turning a panic into an error.
func (s *subscription) call(d *delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
			s.b.log.Error("handler panic", "topic", s.ti.topic, "group", s.group, "id", d.rec.ID, "panic", r)
		}
	}()
	return s.handler(d.handlerContext(s.ctx), d)
}

func (s *subscription) ack(d *delivery) error {
	if err := d.msg.Ack(); err != nil {
		s.b.log.Warn("ack", "topic", s.ti.topic, "group", s.group, "id", d.rec.ID, "err", err)
		return fmt.Errorf("ack %s: %w", d.rec.ID, translate(err))
	}
	if s.timed {
		s.obs.Acked(time.Since(time.UnixMilli(d.rec.TS)))
	}
	s.b.released.forget(d.key)
	if s.order != nil {
		s.order.done(d)
	}
	return nil
}

// fail hands d back for another attempt, or dead-letters it after the last.
func (s *subscription) fail(d *delivery, reason string) {
	s.obs.Nacked()
	if d.attempt >= s.opts.MaxAttempts {
		s.deadLetter(d, reason)
		return
	}
	d.endSpan("nack", keyReason.String(truncate(reason, 512)))
	if err := d.msg.NakWithDelay(s.retry.Load().Delay(d.attempt)); err != nil {
		s.b.log.Warn("nack", "topic", s.ti.topic, "group", s.group, "id", d.rec.ID, "err", err)
	}
}

// drain waits until every delivery of s is settled (pulling has stopped),
// then stops it; at ctx's end it stops at once.
func (s *subscription) drain(ctx context.Context) error {
	select {
	case <-s.done:
	case <-ctx.Done():
		return errors.Join(ctx.Err(), s.stop(context.WithoutCancel(ctx), nil))
	}
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	hdone := make(chan struct{})
	go func() { s.hwg.Wait(); close(hdone) }()
	for {
		s.mu.Lock()
		n := len(s.held)
		s.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-s.idle:
		case <-ctx.Done():
			return errors.Join(ctx.Err(), s.stop(context.WithoutCancel(ctx), nil))
		}
	}
	select {
	case <-hdone:
	case <-ctx.Done():
		return errors.Join(ctx.Err(), s.stop(context.WithoutCancel(ctx), nil))
	}
	return s.stop(ctx, nil)
}

// stop ends the subscription: no new deliveries, running handlers are
// cancelled and awaited, deliveries still unsettled are handed back to the
// group at once. cause, when not nil, is why it ended on its own.
func (s *subscription) stop(ctx context.Context, cause error) error {
	s.stopOnce.Do(func() {
		s.stopPull()
		s.cancel()
		select {
		case <-s.done:
		case <-ctx.Done():
			s.stopErr = ctx.Err()
		}
		s.mu.Lock()
		s.stopping = true
		s.mu.Unlock()
		hdone := make(chan struct{})
		go func() { s.hwg.Wait(); close(hdone) }()
		s.pool.close()
		select {
		case <-hdone:
			s.pool.wait() // the calls returned: the workers are ending
		case <-ctx.Done():
			s.stopErr = ctx.Err()
		}
		if s.order != nil {
			// It ends with the pull loop, once a ManualAck handler it runs
			// returned (handlers were cancelled).
			odone := make(chan struct{})
			go func() { s.order.wg.Wait(); close(odone) }()
			select {
			case <-odone:
			case <-ctx.Done():
				s.stopErr = ctx.Err()
			}
		}
		s.mu.Lock()
		pending := make([]*delivery, 0, len(s.held))
		for _, d := range s.held {
			pending = append(pending, d)
		}
		s.mu.Unlock()
		for _, d := range pending {
			if d.finish(handedOff) == nil {
				d.endSpan("handed_back")
				s.nakWithdrawn(d.msg) // s.done may not be closed: ctx ran out
			}
		}
		if s.order != nil {
			s.order.unpin(ctx)
		}
		s.unregister()
		s.h.stopped(cause)
	})
	return s.stopErr
}

// handBack returns an event that never reached a handler to the group,
// uncounted. While the member stops, its last pull request may still
// stand, and the group would deliver the event straight back to it, round
// after round until the request is withdrawn; every round counts as a
// delivery at the store, which another member then takes for a failed
// attempt. So until then the event waits here (see flushHandBacks).
func (s *subscription) handBack(msg jetstream.Msg, key releaseKey) {
	s.b.released.add(key)
	s.nakWithdrawn(msg)
}

// nakWithdrawn NAKs msg, once the pull request is withdrawn if the member
// stops.
func (s *subscription) nakWithdrawn(msg jetstream.Msg) {
	if s.pullCtx.Err() != nil {
		s.backsMu.Lock()
		if !s.backsDone {
			s.backs = append(s.backs, msg)
			s.backsMu.Unlock()
			return
		}
		s.backsMu.Unlock()
	}
	_ = msg.Nak()
}

// flushHandBacks hands back what waited for the pull request to be
// withdrawn; later hand-backs go at once.
func (s *subscription) flushHandBacks() {
	s.backsMu.Lock()
	backs := s.backs
	s.backs, s.backsDone = nil, true
	s.backsMu.Unlock()
	for _, m := range backs {
		_ = m.Nak()
	}
}

func (s *subscription) unregister() {
	s.b.subsMu.Lock()
	defer s.b.subsMu.Unlock()
	delete(s.b.subs, s)
}

// bufferClock bounds how long the message a callback receives waited in
// the pull buffer: a pull brings at most BatchSize messages, so the one
// now at the head waited at most as long as the callbacks of the
// BatchSize messages before it took. It keeps those durations in a ring,
// with their sum.
type bufferClock struct {
	took []time.Duration
	next int
	sum  time.Duration
}

// add records a callback's duration; n is the pull's batch size.
func (c *bufferClock) add(took time.Duration, n int) {
	n = max(n, 1)
	if len(c.took) != n {
		c.took, c.next, c.sum = make([]time.Duration, n), 0, 0
	}
	c.sum += took - c.took[c.next]
	c.took[c.next] = took
	c.next = (c.next + 1) % len(c.took)
}
