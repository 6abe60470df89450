package gateway

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventhub/eventhub/facade"
)

// session is one client connection's protocol state: its principal, its
// subscriptions and their leases. handle runs on the connection's reader
// goroutine, one frame at a time; deliveries arrive on the bus's
// goroutines; the sweeper runs on a timer. mu guards the shared state.
type session struct {
	gw     *Gateway
	t      transport
	log    *slog.Logger
	ctx    context.Context // cancelled when the session ends
	cancel context.CancelFunc

	// Reader goroutine only.
	principal Principal
	pubs      chan pendingPublish // lazily started publish waiter
	pubDone   chan struct{}
	// The principal's connection quota (reader, then the ended session).
	limitRelease func()

	authed  atomic.Bool
	closing atomic.Bool // no more frames are handled
	// expires is when the credentials expire (UnixNano; 0 never): no
	// EVENT is sent from then on, even before the expiry timer has run.
	expires atomic.Int64

	mu        sync.Mutex
	subs      map[subKey]*subscription
	leases    leaseHeap // every lease of every subscription, by deadline
	sweeper   *time.Timer
	sweepAt   time.Time
	authTimer *time.Timer
	expTimer  *time.Timer
	ended     bool
}

type subKey struct{ topic, group string }

// subscription is one SUBSCRIBE of the session: a ManualAck member of the
// group on the bus, and the leases of the events delivered to the client.
type subscription struct {
	key        subKey
	topics     []string // every topic it reads: key.topic, then opts.topics
	ackTimeout time.Duration
	bsub       facade.Subscription
	leases     map[string]*lease // by event id; at most one per id
	stopped    bool
}

// lease is one event in flight to the client: the bus's delivery handle,
// settled by the client's ACK, NACK or MODACK of the event's id.
type lease struct {
	sub      *subscription
	d        facade.Delivery
	frame    uint64 // the transport's number of its EVENT frame
	id       string
	attempt  int
	deadline time.Time
	index    int // in session.leases
}

type pendingPublish struct {
	corr string
	fut  facade.PublishFuture
}

func newSession(gw *Gateway, t transport, log *slog.Logger) *session {
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{
		gw: gw, t: t, log: log, ctx: ctx, cancel: cancel,
		subs: make(map[subKey]*subscription),
	}
	s.mu.Lock()
	s.authTimer = time.AfterFunc(gw.cfg.AuthTimeout, s.authExpired)
	s.mu.Unlock()
	return s
}

func (s *session) authExpired() {
	if s.authed.Load() {
		return
	}
	s.sendErr("", CodeAuthTimeout, fmt.Sprintf("no AUTH within %v", s.gw.cfg.AuthTimeout))
	s.closeWith(CloseAuthTimeout, CodeAuthTimeout)
}

// tokenExpired ends the session when its credentials expire: the EVENT
// frames still queued are dropped (none is written after the expiry
// instant), the client is told, and the events it held are handed back
// when the reader stops.
func (s *session) tokenExpired() {
	s.closing.Store(true)
	buf := getBuf()
	*buf = AppendErr((*buf)[:0], "", CodeTokenExpired, "credentials expired")
	s.t.Expire(buf, CloseTokenExpired, CodeTokenExpired)
}

// expired reports whether the session's credentials have expired.
func (s *session) expired() bool {
	exp := s.expires.Load()
	return exp != 0 && time.Now().UnixNano() >= exp
}

// closeWith stops frame handling and closes the transport after the
// queued frames.
func (s *session) closeWith(code int, reason string) {
	s.closing.Store(true)
	s.t.Close(code, reason)
}

// slow disconnects a client whose queue is full.
func (s *session) slow() {
	s.log.Warn("client too slow; disconnecting")
	s.closing.Store(true)
	s.t.Abort(CloseSlowClient, CodeSlowClient)
}

func (s *session) send(buf *[]byte) {
	if s.t.Send(buf) == queueFull {
		s.slow()
	}
}

func (s *session) sendErr(corr, code, msg string) {
	buf := getBuf()
	*buf = AppendErr((*buf)[:0], corr, code, msg)
	s.send(buf)
}

func (s *session) sendOK(corr string) {
	buf := getBuf()
	*buf = AppendOK((*buf)[:0], corr)
	s.send(buf)
}

func (s *session) reqCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, s.gw.cfg.RequestTimeout)
}

// handle decodes and executes one client frame. A panic ends the session
// (server_error, 4000); it never reaches the process.
func (s *session) handle(data []byte) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("session panic", "panic", r)
			s.sendErr("", CodeServerError, "internal fault; reconnect")
			s.closeWith(CloseServerError, CodeServerError)
		}
	}()
	var f Frame
	if err := Decode(data, &f); err != nil {
		s.replyErr(f.Corr, err, CodeBadFrame)
		return
	}
	if op, _ := lookupOp(f.Op); !op.FromClient {
		s.sendErr(f.Corr, CodeUnknownOp, fmt.Sprintf("op %s is sent by the server, not the client", f.Op))
		return
	}
	if f.Op != OpAuth && s.principal == nil {
		s.sendErr(f.Corr, CodeUnauthorized, "send AUTH first")
		return
	}
	fallback := CodeInternal
	var err error
	switch f.Op {
	case OpAuth:
		err = s.auth(&f)
	case OpSubscribe:
		err = s.subscribe(&f)
	case OpUnsubscribe:
		err = s.unsubscribe(&f)
	case OpPublish:
		fallback = CodePublishFailed
		err = s.publish(&f)
	case OpAck, OpNack, OpModAck:
		err = s.settle(&f)
	case OpCursor:
		err = s.cursor(&f)
	case OpSeek:
		err = s.seek(&f)
	}
	if err != nil {
		s.replyErr(f.Corr, err, fallback)
	}
}

func (s *session) replyErr(corr string, err error, fallback string) {
	code, msg := toWire(err, fallback)
	if code == CodeInternal || code == CodePublishFailed {
		s.log.Warn("request failed", "code", code, "err", err)
	}
	if ms := retryAfterMs(err); ms > 0 {
		buf := getBuf()
		*buf = AppendErrRetry((*buf)[:0], corr, code, msg, ms)
		s.send(buf)
		return
	}
	s.sendErr(corr, code, msg)
}

func (s *session) auth(f *Frame) error {
	ctx, cancel := s.reqCtx()
	defer cancel()
	p, err := s.gw.auth.Authenticate(ctx, f.Token)
	if err == nil && p == nil {
		err = ErrBadToken
	}
	if err == nil {
		if exp := p.ExpiresAt(); !exp.IsZero() && !exp.After(time.Now()) {
			err = fmt.Errorf("%w: credentials expired", ErrBadToken)
		}
	}
	if err != nil {
		_, msg := toWire(err, CodeBadToken)
		s.log.Info("authentication failed", "reason", msg)
		s.gw.authFailed("ws", CodeBadToken)
		s.sendErr(f.Corr, CodeBadToken, msg)
		s.closeWith(CloseBadToken, CodeBadToken)
		return nil
	}
	if err := s.admit(p); err != nil {
		s.replyErr(f.Corr, err, CodeConnQuota)
		s.closeWith(CloseQuota, CodeConnQuota)
		return nil
	}
	s.principal = p
	s.authed.Store(true)
	s.mu.Lock()
	s.authTimer.Stop()
	if s.expTimer != nil {
		s.expTimer.Stop()
		s.expTimer = nil
	}
	s.expires.Store(0)
	if exp := p.ExpiresAt(); !exp.IsZero() && !s.ended {
		s.expires.Store(exp.UnixNano())
		s.expTimer = time.AfterFunc(time.Until(exp), s.tokenExpired)
	}
	// A new principal keeps only the subscriptions it may hold itself.
	var revoked []*subscription
	for key, sub := range s.subs {
		for _, t := range sub.topics {
			if !p.Allow(ActionSubscribe, t, key.group) {
				revoked = append(revoked, sub)
				delete(s.subs, key)
				break
			}
		}
	}
	stops := make([][]*lease, len(revoked))
	for i, sub := range revoked {
		stops[i] = s.detachLocked(sub)
	}
	s.mu.Unlock()
	for i, sub := range revoked {
		s.gw.authFailed("ws", CodeForbidden)
		b, err := Encode(&Frame{Op: OpErr, Code: CodeForbidden, Topic: sub.key.topic, Group: sub.key.group,
			Msg: fmt.Sprintf("subscription to %s as %s ended: the new credentials have no subscribe permission on it", sub.key.topic, sub.key.group)})
		if err == nil {
			s.send(&b)
		}
		s.stopSub(sub, stops[i], "subscription revoked")
	}
	s.sendOK(f.Corr)
	return nil
}

func (s *session) allow(action, topic, group string) error {
	if !s.principal.Allow(action, topic, group) {
		s.gw.authFailed("ws", CodeForbidden)
		if group != "" {
			return errorf(CodeForbidden, "no %s permission on %s for group %s", action, topic, group)
		}
		return errorf(CodeForbidden, "no %s permission on %s", action, topic)
	}
	return nil
}

func validTopicGroup(f *Frame) error {
	if err := facade.ValidateTopic(f.Topic); err != nil {
		return err
	}
	return facade.ValidateGroup(f.Group)
}

func (s *session) subscribe(f *Frame) error {
	if err := validTopicGroup(f); err != nil {
		return err
	}
	var o facade.SubscribeOptions
	if err := decodeOpts(f.Opts, &o); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	for _, t := range append([]string{f.Topic}, o.Topics...) {
		if err := s.allow(ActionSubscribe, t, f.Group); err != nil {
			return err
		}
	}
	cfg := &s.gw.cfg
	window := cfg.MaxInflightPerSub
	if o.MaxInFlight > 0 {
		window = min(window, o.MaxInFlight)
	}
	ackTimeout := cfg.AckTimeout
	if o.AckTimeoutMs > 0 {
		ackTimeout = time.Duration(o.AckTimeoutMs) * time.Millisecond
	}
	ackTimeout = min(ackTimeout, cfg.MaxAckTimeout)
	bo := o
	bo.ManualAck = true
	bo.MaxInFlight = window
	// The group's window: what the client asked for (maxInFlight keeps
	// its in-process meaning), else the server's default for groups shared
	// by many connections.
	switch {
	case o.GroupMaxInFlight > 0:
		bo.GroupMaxInFlight = min(o.GroupMaxInFlight, cfg.GroupMaxInFlight)
	case o.MaxInFlight > 0:
		bo.GroupMaxInFlight = 0
	default:
		bo.GroupMaxInFlight = cfg.GroupMaxInFlight
	}
	bo.BatchSize = min(o.WithDefaults().BatchSize, window)
	bo.AckTimeoutMs = ackTimeout.Milliseconds()
	bo.Filter = nil

	key := subKey{f.Topic, f.Group}
	sub := &subscription{key: key, topics: append([]string{f.Topic}, o.Topics...), ackTimeout: ackTimeout, leases: make(map[string]*lease)}
	s.mu.Lock()
	switch {
	case s.ended:
		s.mu.Unlock()
		return facade.ErrClosed
	case s.subs[key] != nil:
		s.mu.Unlock()
		return errorf(CodeAlreadySubscribed, "already subscribed to %s as %s", f.Topic, f.Group)
	case len(s.subs) >= cfg.MaxSubscriptions:
		s.mu.Unlock()
		return errorf(CodeBadRequest, "subscription limit (%d) reached", cfg.MaxSubscriptions)
	}
	s.subs[key] = sub
	s.mu.Unlock()

	ctx, cancel := s.reqCtx()
	defer cancel()
	ctx = s.gw.bind(ctx, s.principal)
	bsub, err := s.gw.bus.Subscribe(ctx, f.Topic, f.Group, func(_ context.Context, d facade.Delivery) error {
		s.deliver(sub, d)
		return nil
	}, bo)
	s.mu.Lock()
	if err != nil {
		// Deliveries made before the failure were handed back by the
		// bus when it stopped the partial subscription.
		if s.subs[key] == sub {
			delete(s.subs, key)
		}
		s.detachLocked(sub)
		s.mu.Unlock()
		return err
	}
	sub.bsub = bsub
	s.mu.Unlock()
	s.sendOK(f.Corr)
	return nil
}

// deliver sends one event of sub to the client and leases it. It runs on a
// bus goroutine and never blocks: a client whose queue is full is
// disconnected and the lease, still in the table, is handed back.
func (s *session) deliver(sub *subscription, d facade.Delivery) {
	e := d.Event()
	buf := getBuf()
	*buf = AppendEvent((*buf)[:0], sub.key.topic, sub.key.group, e, d.Attempt(), sub.ackTimeout.Milliseconds())
	deadline := time.Now().Add(sub.ackTimeout)
	s.mu.Lock()
	if sub.stopped {
		// Unsubscribing or ending: the event never reaches the client.
		s.mu.Unlock()
		putBuf(buf)
		s.giveBack(d, false, "unsubscribed")
		return
	}
	l := sub.leases[e.ID]
	if l != nil {
		// A redelivery of an event still in flight here supersedes the
		// old lease: one id is never in flight twice on a subscription.
		// The old delivery's lease ended at the store already.
		l.d, l.attempt, l.deadline = d, d.Attempt(), deadline
		heap.Fix(&s.leases, l.index)
	} else {
		l = &lease{sub: sub, d: d, id: e.ID, attempt: d.Attempt(), deadline: deadline}
		sub.leases[e.ID] = l
		heap.Push(&s.leases, l)
	}
	s.armLocked(deadline)
	if s.expired() {
		// Leased but not sent: the session is ending, and hands it back.
		l.frame = ^uint64(0)
		s.mu.Unlock()
		putBuf(buf)
		return
	}
	res, frame := s.t.SendNumbered(buf)
	l.frame = frame
	if res != sent {
		l.frame = ^uint64(0) // never queued
	}
	s.mu.Unlock()
	if res == queueFull {
		s.slow()
	}
}

// giveBack hands a delivery back to its group: released without spending
// an attempt when the client never saw it (and the bus can), else nacked,
// redelivered with attempt+1 after the bus's retry backoff.
func (s *session) giveBack(d facade.Delivery, seen bool, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.gw.cfg.RequestTimeout)
	defer cancel()
	if r, ok := d.(facade.Releaser); ok && !seen {
		if err := r.Release(ctx); err == nil {
			return
		}
	}
	if err := d.Nack(ctx, reason); err != nil {
		e := d.Event()
		s.log.Debug("hand back", "topic", e.Topic, "group", d.Group(), "id", e.ID, "err", err)
	}
}

// armLocked makes the sweeper run by deadline d.
func (s *session) armLocked(d time.Time) {
	if s.ended {
		return
	}
	if s.sweeper == nil {
		s.sweeper = time.AfterFunc(time.Until(d), s.sweep)
		s.sweepAt = d
		return
	}
	if s.sweepAt.IsZero() || d.Before(s.sweepAt) {
		s.sweeper.Reset(time.Until(d))
		s.sweepAt = d
	}
}

// sweep drops the expired leases: a client's ACK of one is then refused
// (unknown_id). The bus hands their events back by itself, since a
// delivery's own deadline (no later than its lease) has passed too.
func (s *session) sweep() {
	now := time.Now()
	s.mu.Lock()
	s.sweepAt = time.Time{}
	for len(s.leases) > 0 && !s.leases[0].deadline.After(now) {
		l := heap.Pop(&s.leases).(*lease)
		delete(l.sub.leases, l.id)
	}
	if len(s.leases) > 0 {
		s.armLocked(s.leases[0].deadline)
	}
	s.mu.Unlock()
}

// handBack returns a leased event to its group as a spent attempt.
func (s *session) handBack(l *lease, reason string) { s.giveBack(l.d, true, reason) }

// detachLocked stops sub's deliveries and removes its leases, returning
// them.
func (s *session) detachLocked(sub *subscription) []*lease {
	sub.stopped = true
	out := make([]*lease, 0, len(sub.leases))
	for _, l := range sub.leases {
		heap.Remove(&s.leases, l.index)
		out = append(out, l)
	}
	clear(sub.leases)
	return out
}

// stopSub hands sub's leases back, then stops its bus subscription.
func (s *session) stopSub(sub *subscription, leases []*lease, reason string) {
	for _, l := range leases {
		s.handBack(l, reason)
	}
	s.stopBusSub(sub)
}

// endSub is stopSub for a session whose connection is gone: events whose
// EVENT frame was never written are released without spending an attempt
// (the client never saw them); the others are handed back as attempts.
func (s *session) endSub(sub *subscription, leases []*lease, reason string) {
	written := s.t.Written()
	for _, l := range leases {
		s.giveBack(l.d, l.frame <= written, reason)
	}
	s.stopBusSub(sub)
}

// stopBusSub stops sub's bus subscription.
func (s *session) stopBusSub(sub *subscription) {
	if sub.bsub == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.gw.cfg.RequestTimeout)
	defer cancel()
	if err := sub.bsub.Stop(ctx); err != nil {
		s.log.Warn("unsubscribe", "topic", sub.key.topic, "group", sub.key.group, "err", err)
	}
}

func (s *session) unsubscribe(f *Frame) error {
	key := subKey{f.Topic, f.Group}
	s.mu.Lock()
	sub := s.subs[key]
	if sub == nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s/%s", ErrNotSubscribed, f.Topic, f.Group)
	}
	delete(s.subs, key)
	leases := s.detachLocked(sub)
	s.mu.Unlock()
	s.stopSub(sub, leases, "unsubscribed")
	s.sendOK(f.Corr)
	return nil
}

// settle handles ACK, NACK and MODACK: only for an event in flight on this
// subscription (and, when the frame names one, this attempt).
func (s *session) settle(f *Frame) error {
	if f.ID == "" {
		return errorf(CodeBadRequest, "%s needs an id", f.Op)
	}
	if f.Op == OpModAck && f.ExtendMs < 0 {
		return errorf(CodeBadRequest, "extend_ms must not be negative")
	}
	key := subKey{f.Topic, f.Group}
	s.mu.Lock()
	sub := s.subs[key]
	if sub == nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s/%s", ErrNotSubscribed, f.Topic, f.Group)
	}
	l := sub.leases[f.ID]
	if l == nil || (f.Attempt != 0 && f.Attempt != l.attempt) {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s is not in flight on %s/%s (never delivered, already settled, or its lease expired)", facade.ErrUnknownID, f.ID, f.Topic, f.Group)
	}
	if f.Op == OpModAck {
		s.mu.Unlock()
		return s.modAck(f, sub, l)
	}
	delete(sub.leases, f.ID)
	heap.Remove(&s.leases, l.index)
	s.mu.Unlock()

	// Settling is a fire-and-forget message to the store: no timeout
	// context per frame (it would be the hot path's biggest allocation).
	var err error
	if f.Op == OpAck {
		err = l.d.Ack(s.ctx)
	} else {
		reason := f.Reason
		if reason == "" {
			reason = "nacked by client"
		}
		err = l.d.Nack(s.ctx, reason)
	}
	if err != nil {
		return leaseErr(err, f.ID)
	}
	if f.Corr != "" {
		s.sendOK(f.Corr)
	}
	return nil
}

// leaseErr turns a delivery that was settled meanwhile (its deadline
// passed at the store, or its subscription stopped) into the protocol's
// unknown_id.
func leaseErr(err error, id string) error {
	if errors.Is(err, facade.ErrExpired) || errors.Is(err, facade.ErrSettled) || errors.Is(err, facade.ErrClosed) {
		return fmt.Errorf("%w: lease of %s ended: %w", facade.ErrUnknownID, id, err)
	}
	return err
}

// modAck moves the lease to now + max(1s, extend_ms, or the subscription's
// ack timeout when extend_ms is absent), at most MaxAckTimeout, and the
// store's deadline with it.
func (s *session) modAck(f *Frame, sub *subscription, l *lease) error {
	by := time.Duration(f.ExtendMs) * time.Millisecond
	if f.ExtendMs == 0 {
		by = sub.ackTimeout
	}
	by = min(max(by, time.Second), s.gw.cfg.MaxAckTimeout)
	ctx, cancel := s.reqCtx()
	defer cancel()
	if err := l.d.Extend(ctx, by); err != nil {
		return leaseErr(err, f.ID)
	}
	deadline := time.Now().Add(by)
	s.mu.Lock()
	if sub.leases[f.ID] != l {
		// It expired (and was handed back) while the store extended it.
		s.mu.Unlock()
		return fmt.Errorf("%w: lease of %s expired", facade.ErrUnknownID, f.ID)
	}
	l.deadline = deadline
	heap.Fix(&s.leases, l.index)
	s.armLocked(deadline)
	s.mu.Unlock()
	if f.Corr != "" {
		s.sendOK(f.Corr)
	}
	return nil
}

func (s *session) publish(f *Frame) error {
	if err := facade.ValidateTopic(f.Topic); err != nil {
		return err
	}
	if err := s.allow(ActionPublish, f.Topic, ""); err != nil {
		return err
	}
	if f.Payload == nil {
		return fmt.Errorf("%w: missing payload (use null for none)", facade.ErrBadPayload)
	}
	var o facade.PublishOptions
	if err := decodeOpts(f.Opts, &o); err != nil {
		return err
	}
	if err := s.gw.limitPublish(s.principal, f.Topic, len(f.Payload)); err != nil {
		return err
	}
	ctx, cancel := s.reqCtx()
	defer cancel()
	ctx = s.gw.bind(ctx, s.principal)
	if ap := s.gw.apub; ap != nil {
		// Pipelined: frames are stored in the order they arrived; a
		// waiter answers each once the store acknowledged it.
		fut, err := ap.PublishAsync(ctx, f.Topic, f.Payload, o)
		if err != nil {
			return err
		}
		if s.pubs == nil {
			s.pubs = make(chan pendingPublish, 256)
			s.pubDone = make(chan struct{})
			go s.publishWaiter()
		}
		s.pubs <- pendingPublish{corr: f.Corr, fut: fut}
		return nil
	}
	rec, err := s.gw.bus.Publish(ctx, f.Topic, f.Payload, o)
	if err != nil {
		return err
	}
	buf := getBuf()
	*buf = AppendPublishOK((*buf)[:0], f.Corr, rec.ID, rec.Seq, rec.TS)
	s.send(buf)
	return nil
}

func (s *session) publishWaiter() {
	defer close(s.pubDone)
	for p := range s.pubs {
		ctx, cancel := s.reqCtx()
		rec, err := p.fut.Wait(ctx)
		cancel()
		if err != nil {
			s.replyErr(p.corr, err, CodePublishFailed)
			continue
		}
		buf := getBuf()
		*buf = AppendPublishOK((*buf)[:0], p.corr, rec.ID, rec.Seq, rec.TS)
		s.send(buf)
	}
}

func (s *session) cursor(f *Frame) error {
	if err := validTopicGroup(f); err != nil {
		return err
	}
	if err := s.allow(ActionSubscribe, f.Topic, f.Group); err != nil {
		return err
	}
	ctx, cancel := s.reqCtx()
	defer cancel()
	c, err := s.gw.bus.GetCursor(ctx, f.Topic, f.Group)
	if err != nil {
		return err
	}
	b, err := Encode(&Frame{Op: OpOK, Corr: f.Corr, Cursor: c})
	if err != nil {
		return err
	}
	s.send(&b)
	return nil
}

func (s *session) seek(f *Frame) error {
	if err := validTopicGroup(f); err != nil {
		return err
	}
	if err := s.allow(ActionSubscribe, f.Topic, f.Group); err != nil {
		return err
	}
	if f.Cursor == nil {
		return errorf(CodeBadRequest, `SEEK needs a cursor ({} for the beginning)`)
	}
	c := *f.Cursor
	c.Topic = f.Topic
	ctx, cancel := s.reqCtx()
	defer cancel()
	if err := s.gw.bus.SetCursor(ctx, f.Topic, f.Group, c); err != nil {
		return err
	}
	s.sendOK(f.Corr)
	return nil
}

// end tears the session down after its reader stopped: every in-flight
// event is handed back at once, every bus subscription stopped.
func (s *session) end(reason string) {
	s.closing.Store(true)
	s.cancel()
	s.mu.Lock()
	s.ended = true
	type stop struct {
		sub    *subscription
		leases []*lease
	}
	stops := make([]stop, 0, len(s.subs))
	for _, sub := range s.subs {
		stops = append(stops, stop{sub, s.detachLocked(sub)})
	}
	clear(s.subs)
	s.authTimer.Stop()
	if s.expTimer != nil {
		s.expTimer.Stop()
	}
	if s.sweeper != nil {
		s.sweeper.Stop()
	}
	s.mu.Unlock()

	var wg sync.WaitGroup
	for _, st := range stops {
		wg.Go(func() { s.endSub(st.sub, st.leases, reason) })
	}
	wg.Wait()
	if s.pubs != nil {
		close(s.pubs)
		<-s.pubDone
	}
}

// leaseHeap orders leases by deadline (container/heap).
type leaseHeap []*lease

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *leaseHeap) Push(x any) {
	l := x.(*lease)
	l.index = len(*h)
	*h = append(*h, l)
}
func (h *leaseHeap) Pop() any {
	old := *h
	n := len(old)
	l := old[n-1]
	old[n-1] = nil
	l.index = -1
	*h = old[:n-1]
	return l
}
