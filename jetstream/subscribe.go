package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

// subscription is one member of a group on one topic.
type subscription struct {
	b       *Bus
	ti      *topicInfo
	group   string
	opts    facade.SubscribeOptions
	handler facade.Handler

	ctx    context.Context // cancelled when the subscription stops
	cancel context.CancelFunc
	sem    chan struct{} // one slot per delivery in flight
	done   chan struct{} // closed when run returns
	hwg    sync.WaitGroup

	mu       sync.Mutex
	inflight map[string]*delivery // by event id
	floor    floorTracker
	obs      GroupObserver

	stopOnce sync.Once
	stopErr  error
}

// delivery is one delivery of an event to this member.
type delivery struct {
	msg     jetstream.Msg
	rec     *facade.EventRecord
	key     releaseKey
	attempt int
	// deadline is when JetStream redelivers the event unless it is acked
	// (ManualAck: moved by Extend; guarded by the subscription's mu).
	deadline time.Time
}

// Subscribe implements [facade.Subscriber].
func (b *Bus) Subscribe(ctx context.Context, topic, group string, handler facade.Handler, opts facade.SubscribeOptions) (facade.Unsubscribe, error) {
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
	var subs []*subscription
	stopAll := func(ctx context.Context) error {
		var errs []error
		for _, s := range subs {
			errs = append(errs, s.stop(ctx))
		}
		return errors.Join(errs...)
	}
	seen := map[string]bool{}
	for _, t := range topics {
		if seen[t] {
			continue
		}
		seen[t] = true
		s, err := b.subscribeOne(ctx, t, group, handler, opts)
		if err != nil {
			_ = stopAll(context.WithoutCancel(ctx))
			return nil, err
		}
		subs = append(subs, s)
	}
	return stopAll, nil
}

func (b *Bus) subscribeOne(ctx context.Context, topic, group string, handler facade.Handler, opts facade.SubscribeOptions) (*subscription, error) {
	ti, err := b.topic(ctx, topic)
	if err != nil {
		return nil, err
	}
	cons, err := b.ensureGroup(ctx, ti, group, opts)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &subscription{
		b: b, ti: ti, group: group, opts: opts, handler: handler,
		ctx: sctx, cancel: cancel,
		sem:      make(chan struct{}, opts.MaxInFlight),
		done:     make(chan struct{}),
		inflight: make(map[string]*delivery),
		obs:      b.cfg.Observer.Group(topic, group),
	}
	s.floor.reset(b.cursorOf(ctx, ti, cons.CachedInfo().AckFloor.Stream))

	b.subsMu.Lock()
	if b.closed {
		b.subsMu.Unlock()
		cancel()
		return nil, facade.ErrClosed
	}
	k := groupKey{topic, group}
	b.subs[k] = append(b.subs[k], s)
	b.wg.Add(1)
	b.subsMu.Unlock()

	cc, err := s.consume(cons)
	if err != nil {
		s.unregister()
		b.wg.Done()
		cancel()
		return nil, err
	}
	go func() {
		defer b.wg.Done()
		s.run(cc)
	}()
	if opts.ManualAck {
		b.wg.Go(s.sweep)
	}
	return s, nil
}

// sweep drops ManualAck deliveries whose ack deadline passed: JetStream
// redelivers them (maybe to another member), so holding them would keep a
// slot forever and let a stale Ack settle the new delivery.
func (s *subscription) sweep() {
	every := min(s.opts.AckTimeout()/4, time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			var expired []*delivery
			s.mu.Lock()
			for _, d := range s.inflight {
				if now.After(d.deadline) {
					expired = append(expired, d)
				}
			}
			s.mu.Unlock()
			for _, d := range expired {
				if s.take(d) {
					// Hand it back now: the group's AckWait may be longer
					// than this member's ack timeout.
					_ = d.msg.Nak()
					s.floor.drop(d.rec.Seq)
				}
			}
		}
	}
}

func (s *subscription) consume(cons jetstream.Consumer) (jetstream.ConsumeContext, error) {
	// A member never buffers more than its window: buffered events' ack
	// deadlines run while they wait for a slot.
	cc, err := cons.Consume(s.onMsg,
		jetstream.PullMaxMessages(s.opts.BatchSize),
		jetstream.PullExpiry(s.b.cfg.PullExpiry),
		jetstream.PullHeartbeat(s.b.cfg.PullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			s.b.log.Debug("consume", "topic", s.ti.topic, "group", s.group, "err", err)
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("consume %s/%s: %w", s.ti.topic, s.group, translate(err))
	}
	return cc, nil
}

// run supervises the pull loop: when it ends on its own (the consumer was
// deleted, the connection closed) it provisions the group again and resumes.
func (s *subscription) run(cc jetstream.ConsumeContext) {
	defer close(s.done)
	backoff := 100 * time.Millisecond
	for {
		if cc != nil {
			select {
			case <-s.ctx.Done():
				cc.Drain()
				<-cc.Closed()
				return
			case <-cc.Closed():
				s.b.log.Warn("pull loop ended; resuming", "topic", s.ti.topic, "group", s.group)
			}
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
		cc = nil
		cons, err := s.b.ensureGroup(s.ctx, s.ti, s.group, s.opts)
		if err == nil {
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
	meta, err := msg.Metadata()
	if err != nil {
		s.b.log.Error("message without metadata", "topic", s.ti.topic, "err", err)
		return
	}
	key := keyOf(meta)
	if s.ctx.Err() != nil {
		// Stopping: hand buffered events back at once, uncounted.
		s.b.released.add(key)
		_ = msg.Nak()
		return
	}
	attempt := int(meta.NumDelivered)
	if attempt > 1 {
		attempt -= s.b.released.count(key)
	}
	rec := fromMsg(msg.Subject(), msg.Headers(), msg.Data(), meta.Sequence.Stream, meta.Timestamp)
	d := &delivery{msg: msg, rec: rec, key: key, attempt: attempt, deadline: time.Now().Add(s.opts.AckTimeout())}
	if d.attempt > s.opts.MaxAttempts {
		// The last attempt's ack deadline passed.
		s.deadLetter(d, "ack deadline passed on the last attempt")
		return
	}
	if s.opts.Filter != nil && !s.opts.Filter(rec) {
		s.floor.push(rec)
		s.floor.ack(rec.Seq)
		_ = msg.Ack()
		return
	}
	s.obs.Delivered()
	t0 := time.Now()
	if !s.admit(d) {
		s.b.released.add(key) // stopping before it reached the handler
		_ = msg.Nak()
		return
	}
	waited := time.Since(t0)
	s.obs.Waited(waited)
	if waited > s.opts.AckTimeout()/10 {
		// Its ack clock ran while it waited for a slot: start it again, so
		// the handler gets the whole ack timeout.
		_ = msg.InProgress()
		s.mu.Lock()
		d.deadline = time.Now().Add(s.opts.AckTimeout())
		s.mu.Unlock()
	}
	dc := facade.DeliveryContext{
		Group:       s.group,
		Attempt:     d.attempt,
		MaxAttempts: s.opts.MaxAttempts,
		AckDeadline: d.deadline,
		Pending:     meta.NumPending,
		Cursor:      s.floor.cursor(),
	}
	if s.opts.ManualAck {
		// A ManualAck handler only receives the event (acks come later), so
		// it runs here, one at a time in stream order: what a WebSocket
		// subscription needs to send EVENTs in order.
		s.handle(d, dc)
		return
	}
	s.hwg.Add(1)
	go func() {
		defer s.hwg.Done()
		s.handle(d, dc)
	}()
}

// admit takes a slot for d, waiting while MaxInFlight deliveries are out. A
// redelivery of an event this member still holds takes over its slot.
func (s *subscription) admit(d *delivery) bool {
	s.mu.Lock()
	if old, ok := s.inflight[d.rec.ID]; ok {
		_ = old // superseded: its late ack or nack still reaches the same sequence
		s.inflight[d.rec.ID] = d
		s.mu.Unlock()
		return true
	}
	s.mu.Unlock()
	select {
	case s.sem <- struct{}{}:
	case <-s.ctx.Done():
		return false
	}
	s.mu.Lock()
	s.inflight[d.rec.ID] = d
	s.mu.Unlock()
	s.obs.InFlight(1)
	s.floor.push(d.rec)
	return true
}

// take removes d's event from the in-flight set if d is still its current
// delivery, and frees its slot. It reports whether it did.
func (s *subscription) take(d *delivery) bool {
	s.mu.Lock()
	cur, ok := s.inflight[d.rec.ID]
	if !ok || cur != d {
		s.mu.Unlock()
		return false
	}
	delete(s.inflight, d.rec.ID)
	s.mu.Unlock()
	<-s.sem
	s.obs.InFlight(-1)
	return true
}

// takeID is take by event id, for Ack and Nack calls.
func (s *subscription) takeID(id string) *delivery {
	s.mu.Lock()
	d, ok := s.inflight[id]
	if ok {
		delete(s.inflight, id)
	}
	s.mu.Unlock()
	if ok {
		<-s.sem
		s.obs.InFlight(-1)
	}
	return d
}

func (s *subscription) handle(d *delivery, dc facade.DeliveryContext) {
	t0 := time.Now()
	err := s.call(d.rec, dc)
	s.obs.Handled(time.Since(t0))
	if err == nil && s.opts.ManualAck {
		return // stays in flight until Ack or Nack
	}
	if !s.take(d) {
		return // superseded by a redelivery, which owns the event now
	}
	if err == nil {
		_ = s.ack(d) // a lost ack means a redelivery: at least once
		return
	}
	s.fail(d, err.Error())
}

// call runs the handler, turning a panic into an error.
func (s *subscription) call(e *facade.EventRecord, dc facade.DeliveryContext) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
			s.b.log.Error("handler panic", "topic", s.ti.topic, "group", s.group, "id", e.ID, "panic", r)
		}
	}()
	return s.handler(s.ctx, e, dc)
}

func (s *subscription) ack(d *delivery) error {
	if err := d.msg.Ack(); err != nil {
		s.b.log.Warn("ack", "topic", s.ti.topic, "group", s.group, "id", d.rec.ID, "err", err)
		return fmt.Errorf("ack %s: %w", d.rec.ID, translate(err))
	}
	s.obs.Acked(time.Since(time.UnixMilli(d.rec.TS)))
	s.floor.ack(d.rec.Seq)
	s.b.released.forget(d.key)
	return nil
}

// fail hands d back for another attempt, or dead-letters it after the last.
func (s *subscription) fail(d *delivery, reason string) {
	s.obs.Nacked()
	if d.attempt >= s.opts.MaxAttempts {
		s.deadLetter(d, reason)
		return
	}
	delay := s.b.cfg.RetryBackoff << min(d.attempt-1, 16)
	delay = min(delay, s.b.cfg.MaxRetryBackoff)
	if err := d.msg.NakWithDelay(delay); err != nil {
		s.b.log.Warn("nack", "topic", s.ti.topic, "group", s.group, "id", d.rec.ID, "err", err)
	}
	// The redelivery may go to another member: stop waiting for it here.
	s.floor.drop(d.rec.Seq)
}

// stop ends the subscription: no new deliveries, running handlers finish,
// events still unacknowledged are handed back to the group at once.
func (s *subscription) stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.cancel()
		select {
		case <-s.done:
		case <-ctx.Done():
			s.stopErr = ctx.Err()
		}
		hdone := make(chan struct{})
		go func() { s.hwg.Wait(); close(hdone) }()
		select {
		case <-hdone:
		case <-ctx.Done():
			s.stopErr = ctx.Err()
		}
		s.mu.Lock()
		pending := make([]*delivery, 0, len(s.inflight))
		for _, d := range s.inflight {
			pending = append(pending, d)
		}
		s.mu.Unlock()
		for _, d := range pending {
			if s.take(d) {
				_ = d.msg.Nak()
			}
		}
		s.unregister()
	})
	return s.stopErr
}

func (s *subscription) unregister() {
	b := s.b
	b.subsMu.Lock()
	defer b.subsMu.Unlock()
	k := groupKey{s.ti.topic, s.group}
	ss := b.subs[k]
	for i, x := range ss {
		if x == s {
			ss = append(ss[:i], ss[i+1:]...)
			break
		}
	}
	if len(ss) == 0 {
		delete(b.subs, k)
	} else {
		b.subs[k] = ss
	}
}
