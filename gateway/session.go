package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/wire"
)

// session is one client connection's protocol state: its principal, its
// subscriptions and their leases. handle runs on the connection's reader
// goroutine, one frame at a time; deliveries arrive on the bus's
// goroutines, and so do the bus's notices of expired leases. mu guards the
// shared state.
type session struct {
	gw     *Gateway
	t      transport
	log    *slog.Logger
	ctx    context.Context // cancelled when the session ends
	cancel context.CancelFunc
	meta   sessionMeta // what the admin API lists (sessions.go)

	// Reader goroutine only.
	principal Principal
	// batch: the last AUTH asked for batched frames; the client may then
	// send batches too.
	batch bool
	// dec decodes the client's frames, whose topics and groups repeat.
	dec wire.Decoder
	// frames holds the frames of a batch being handled, reused.
	frames  [][]byte
	pubs    chan pendingPublish // lazily started publish waiter
	pubDone chan struct{}
	// The principal's connection quota (reader, then the ended session).
	limitRelease func()

	authed  atomic.Bool
	closing atomic.Bool // no more frames are handled
	// expires is when the credentials expire (UnixNano; 0 never): no
	// EVENT is sent from then on, even before the expiry timer has run.
	expires atomic.Int64

	mu        sync.Mutex
	subs      map[subKey]*subscription
	lives     map[string]*liveSub // live subscriptions by topic; nil while starting
	authTimer *time.Timer
	expTimer  *time.Timer
	ended     bool
}

type subKey struct{ topic, group string }

// subscription is one SUBSCRIBE of the session: attached to the gateway's
// member of the group on each topic it reads, and the leases of the events
// delivered to the client.
type subscription struct {
	s          *session
	key        subKey
	topics     []string // every topic it reads: key.topic, then opts.topics
	ackTimeout time.Duration
	window     int32             // most leases at once
	members    []*member         // one per topic, once joined
	leases     map[string]*lease // by event id; at most one per id
	stopped    bool

	release func() // the subscription quota's, when it ends; nil: none
	left    bool   // it left its members (guarded by the session's mu)

	held   atomic.Int32 // leases plus slots reserved by a dispatching member
	closed atomic.Bool  // stopped, readable without the session's lock
}

// reserve takes a window slot for an event about to be delivered.
func (sub *subscription) reserve() bool {
	for {
		n := sub.held.Load()
		if n >= sub.window || sub.closed.Load() || sub.s.closing.Load() {
			return false
		}
		if sub.held.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// freed returns a window slot and tells the members.
func (sub *subscription) freed() {
	sub.held.Add(-1)
	for _, m := range sub.members {
		m.wake()
	}
}

// lease is one event in flight to the client: the bus's delivery handle,
// settled by the client's ACK, NACK or MODACK of the event's id. Its
// deadline is the delivery's.
type lease struct {
	sub   *subscription
	d     facade.Delivery
	frame uint64 // the transport's number of its EVENT frame
	id    string
}

type pendingPublish struct {
	corr string
	fut  facade.PublishFuture
}

func newSession(gw *Gateway, t transport, log *slog.Logger) *session {
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{
		gw: gw, t: t, log: log, ctx: ctx, cancel: cancel,
		subs:  make(map[subKey]*subscription),
		lives: make(map[string]*liveSub),
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
	s.sendErr("", wire.CodeAuthTimeout, fmt.Sprintf("no AUTH within %v", s.gw.cfg.AuthTimeout))
	s.closeWith(wire.CloseAuthTimeout, wire.CodeAuthTimeout)
}

// tokenExpired ends the session when its credentials expire: the EVENT
// frames still queued are dropped (none is written after the expiry
// instant), the client is told, and the events it held are handed back
// when the reader stops.
func (s *session) tokenExpired() {
	s.closing.Store(true)
	buf := getBuf()
	*buf = wire.AppendErr((*buf)[:0], "", wire.CodeTokenExpired, "credentials expired")
	s.t.Expire(buf, wire.CloseTokenExpired, wire.CodeTokenExpired)
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
	s.t.Abort(wire.CloseSlowClient, wire.CodeSlowClient)
}

func (s *session) send(buf *[]byte) {
	if s.t.Send(buf) == queueFull {
		s.slow()
	}
}

func (s *session) sendErr(corr, code, msg string) {
	buf := getBuf()
	*buf = wire.AppendErr((*buf)[:0], corr, code, msg)
	s.send(buf)
}

func (s *session) sendOK(corr string) {
	buf := getBuf()
	*buf = wire.AppendOK((*buf)[:0], corr)
	s.send(buf)
}

// sendPublishOK answers a PUBLISH (or DELETE) with the stored event's
// id, seq and ts.
func (s *session) sendPublishOK(corr string, rec *facade.EventRecord) {
	buf := getBuf()
	*buf = wire.AppendPublishOK((*buf)[:0], corr, rec.ID, rec.Seq, rec.TS)
	s.send(buf)
}

// sendEnded tells the client that its subscription to topic (as group,
// "" for a live one) ended, with code and why.
func (s *session) sendEnded(code, topic, group, msg string) {
	if b, err := wire.Encode(&wire.Frame{Op: wire.OpErr, Code: code, Topic: topic, Group: group, Msg: msg}); err == nil {
		s.send(&b)
	}
}

func (s *session) reqCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, s.gw.cfg.RequestTimeout)
}

// handle decodes and executes one client message: a frame, or, once the
// client asked for batched frames, a batch of frames, executed in order as
// if sent one by one (a malformed batch is refused whole). A panic ends the
// session (server_error, 4000); it never reaches the process.
func (s *session) handle(data []byte) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("session panic", "panic", r)
			s.sendErr("", wire.CodeServerError, "internal fault; reconnect")
			s.closeWith(wire.CloseServerError, wire.CodeServerError)
		}
	}()
	if !s.batch || !wire.IsBatch(data) {
		s.handleOne(data)
		return
	}
	// A malformed batch is refused whole: none of its frames run (a bad
	// frame in a well-formed one gets its own ERR from handleOne).
	frames := s.frames[:0]
	defer func() {
		clear(frames)
		if cap(frames) <= wire.BatchMaxFrames {
			s.frames = frames[:0]
		}
	}()
	n := 0
	if err := wire.SplitBatch(data, func(frame []byte) bool {
		if n++; n <= wire.BatchMaxFrames {
			frames = append(frames, frame)
		}
		return true
	}); err != nil {
		s.replyErr("", err, wire.CodeBadFrame)
		return
	}
	if n > wire.BatchMaxFrames {
		s.sendErr("", wire.CodeBadFrame, fmt.Sprintf("a batch holds at most %d frames, this one %d", wire.BatchMaxFrames, n))
		return
	}
	limit := s.gw.cfg.MaxFrameBytes
	for _, frame := range frames {
		if int64(len(frame)) > limit {
			s.sendErr("", wire.CodeFrameTooLarge, "frame of a batch larger than "+strconv.FormatInt(limit, 10)+" bytes discarded")
		} else {
			s.handleOne(frame)
		}
		if s.closing.Load() {
			return
		}
	}
}

// handleOne decodes and executes one client frame.
func (s *session) handleOne(data []byte) {
	var f wire.Frame
	if err := s.dec.Decode(data, &f); err != nil {
		s.replyErr(f.Corr, err, wire.CodeBadFrame)
		return
	}
	if op, _ := wire.LookupOp(f.Op); !op.FromClient {
		s.sendErr(f.Corr, wire.CodeUnknownOp, fmt.Sprintf("op %s is sent by the server, not the client", f.Op))
		return
	}
	if f.Op != wire.OpAuth && s.principal == nil {
		s.sendErr(f.Corr, wire.CodeUnauthorized, "send AUTH first")
		return
	}
	fallback := wire.CodeInternal
	var err error
	switch f.Op {
	case wire.OpAuth:
		err = s.auth(&f)
	case wire.OpSubscribe:
		err = s.subscribe(&f)
	case wire.OpUnsubscribe:
		err = s.unsubscribe(&f)
	case wire.OpPublish:
		fallback = wire.CodePublishFailed
		err = s.publish(&f)
	case wire.OpAck, wire.OpNack, wire.OpModAck:
		err = s.settle(&f)
	case wire.OpCursor:
		err = s.cursor(&f)
	case wire.OpSeek:
		err = s.seek(&f)
	case wire.OpDelete:
		fallback = wire.CodePublishFailed
		err = s.deleteKey(&f)
	}
	if err != nil {
		s.replyErr(f.Corr, err, fallback)
	}
}

func (s *session) replyErr(corr string, err error, fallback string) {
	code, msg := wire.FromError(err, fallback)
	if code == wire.CodeInternal || code == wire.CodePublishFailed {
		s.log.Warn("request failed", "code", code, "err", err)
	}
	if ms := retryAfterMs(err); ms > 0 {
		buf := getBuf()
		*buf = wire.AppendErrRetry((*buf)[:0], corr, code, msg, ms)
		s.send(buf)
		return
	}
	s.sendErr(corr, code, msg)
}

func (s *session) auth(f *wire.Frame) error {
	ctx, cancel := s.reqCtx()
	defer cancel()
	p, err := s.gw.auth.Authenticate(ctx, f.Token)
	if err == nil && p == nil {
		err = wire.ErrBadToken
	}
	if err == nil {
		if exp := p.ExpiresAt(); !exp.IsZero() && !exp.After(time.Now()) {
			err = fmt.Errorf("%w: credentials expired", wire.ErrBadToken)
		}
	}
	if err != nil {
		_, msg := wire.FromError(err, wire.CodeBadToken)
		s.log.Info("authentication failed", "reason", msg)
		s.gw.authFailed("ws", wire.CodeBadToken)
		s.sendErr(f.Corr, wire.CodeBadToken, msg)
		s.closeWith(wire.CloseBadToken, wire.CodeBadToken)
		return nil
	}
	if err := s.admit(p); err != nil {
		s.replyErr(f.Corr, err, wire.CodeConnQuota)
		s.closeWith(wire.CloseQuota, wire.CodeConnQuota)
		return nil
	}
	// Another subject's subscriptions count against its quota: theirs
	// move to p below.
	move := s.gw.cfg.Limiter != nil && s.principal != nil && principalName(s.principal) != principalName(p)
	s.principal = p
	s.meta.setPrincipal(p)
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
	var liveRevoked []*liveSub
	for topic, ls := range s.lives {
		if ls != nil && !p.Allow(ActionSubscribe, topic, "") {
			liveRevoked = append(liveRevoked, ls)
			delete(s.lives, topic)
		}
	}
	var kept []*subscription
	var liveKept []*liveSub
	if move {
		for _, sub := range s.subs {
			kept = append(kept, sub)
		}
		for _, ls := range s.lives {
			if ls != nil {
				liveKept = append(liveKept, ls)
			}
		}
	}
	s.mu.Unlock()
	for _, ls := range liveRevoked {
		s.gw.unfollow(ls)
		s.gw.authFailed("ws", wire.CodeForbidden)
		s.sendEnded(wire.CodeForbidden, ls.lt.topic, "",
			fmt.Sprintf("live subscription to %s ended: the new credentials have no subscribe permission on it", ls.lt.topic))
	}
	for i, sub := range revoked {
		s.gw.authFailed("ws", wire.CodeForbidden)
		s.sendEnded(wire.CodeForbidden, sub.key.topic, sub.key.group,
			fmt.Sprintf("subscription to %s as %s ended: the new credentials have no subscribe permission on it", sub.key.topic, sub.key.group))
		s.stopSub(sub, stops[i], "subscription revoked")
	}
	s.moveHolds(p, kept, liveKept)
	// Frames queued from here on may be batched: the client that asked
	// reads batches from the moment it sent AUTH.
	s.batch = f.Batch
	s.t.SetBatch(f.Batch)
	s.sendOK(f.Corr)
	return nil
}

// moveHolds counts subscriptions of the session against p, after a re-AUTH
// as another subject: each gives back its hold on the previous principal's
// subscription quota and takes one on p's. One that p's quota has no room
// for ends with {"op":"ERR","code":"subscription_quota","topic":…}, its
// events handed back to the group. Reader goroutine only.
func (s *session) moveHolds(p Principal, subs []*subscription, lives []*liveSub) {
	ctx, cancel := s.reqCtx()
	defer cancel()
	ended := func(topic, group string, err error) {
		_, msg := wire.FromError(err, wire.CodeSubQuota)
		what := topic
		if group != "" {
			what += " as " + group
		}
		s.sendEnded(wire.CodeSubQuota, topic, group,
			fmt.Sprintf("subscription to %s ended: the new credentials' principal has no room for it: %s", what, msg))
	}
	for _, sub := range subs {
		err := s.rehold(ctx, p, &s.mu, &sub.release, func() bool { return sub.left })
		if err == nil {
			continue
		}
		s.mu.Lock()
		if s.subs[sub.key] != sub {
			s.mu.Unlock()
			continue
		}
		delete(s.subs, sub.key)
		leases := s.detachLocked(sub)
		s.mu.Unlock()
		ended(sub.key.topic, sub.key.group, err)
		s.stopSub(sub, leases, "subscription quota")
	}
	for _, ls := range lives {
		err := s.rehold(ctx, p, &ls.mu, &ls.release, func() bool { return ls.dead })
		if err == nil {
			continue
		}
		topic := ls.lt.topic
		s.mu.Lock()
		mine := s.lives[topic] == ls
		if mine {
			delete(s.lives, topic)
		}
		s.mu.Unlock()
		if mine {
			s.gw.unfollow(ls)
			ended(topic, "", err)
		}
	}
}

// rehold gives back the quota hold in *release and takes one on p's
// subscription quota in its place, unless gone reports that its
// subscription ended meanwhile; mu guards both.
func (s *session) rehold(ctx context.Context, p Principal, mu *sync.Mutex, release *func(), gone func() bool) error {
	mu.Lock()
	old := *release
	*release = nil
	mu.Unlock()
	if old != nil {
		old()
	}
	r, err := s.gw.holdSubscription(ctx, p)
	if err != nil {
		return err
	}
	mu.Lock()
	dead := gone()
	if !dead {
		*release = r
	}
	mu.Unlock()
	if dead {
		r()
	}
	return nil
}

// principalName is the name of p whose quotas the limiter counts (its
// token's subject), "" for a principal without one.
func principalName(p Principal) string {
	if n, ok := p.(Named); ok {
		return n.Name()
	}
	return ""
}

func (s *session) allow(action, topic, group string) error {
	if !s.principal.Allow(action, topic, group) {
		s.gw.authFailed("ws", wire.CodeForbidden)
		if group != "" {
			return wire.Errorf(wire.CodeForbidden, "no %s permission on %s for group %s", action, topic, group)
		}
		return wire.Errorf(wire.CodeForbidden, "no %s permission on %s", action, topic)
	}
	return nil
}

// validTopicGroup checks the topic and group of a group's frame; the topic
// may be a pattern (a group over a topic family).
func validTopicGroup(f *wire.Frame) error {
	if err := facade.ValidatePattern(f.Topic); err != nil {
		return err
	}
	return facade.ValidateGroup(f.Group)
}

func (s *session) subscribe(f *wire.Frame) error {
	if f.Group == "" {
		return s.subscribeLive(f)
	}
	// A group may read a pattern over a topic family; the policy must
	// allow every topic the pattern matches.
	if err := validTopicGroup(f); err != nil {
		return err
	}
	var o facade.SubscribeOptions
	if err := wire.DecodeOpts(f.Opts, &o); err != nil {
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
	// The options of the gateway's member of the group (the first
	// subscription on this gateway starts it). Its window, and the
	// group's: what the client asked for (maxInFlight keeps its
	// in-process meaning: with 1, a failing event holds the group back
	// until it is settled), else the server's default for groups shared by
	// many connections. Each subscription takes at most its own window.
	bo := o
	bo.ManualAck = true
	switch {
	case o.GroupMaxInFlight > 0:
		bo.GroupMaxInFlight = min(o.GroupMaxInFlight, cfg.GroupMaxInFlight)
		bo.MaxInFlight = min(bo.GroupMaxInFlight, 100_000)
	case o.MaxInFlight > 0:
		bo.GroupMaxInFlight = 0
		bo.MaxInFlight = window
	default:
		bo.GroupMaxInFlight = cfg.GroupMaxInFlight
		bo.MaxInFlight = min(cfg.GroupMaxInFlight, 100_000)
	}
	// The member pulls for every connection of the group on this gateway,
	// but never more at once than the first connection's window: events
	// waiting in the pull buffer for a slot have their ack clock running
	// at the store, and one that waits past the group's ack wait is
	// redelivered under the feet of the connection it finally goes to.
	bo.BatchSize = min(window, bo.MaxInFlight)
	if o.BatchSize > 0 {
		bo.BatchSize = min(bo.BatchSize, o.BatchSize)
	}
	bo.AckTimeoutMs = ackTimeout.Milliseconds()
	bo.Filter = nil

	key := subKey{f.Topic, f.Group}
	sub := &subscription{s: s, key: key, topics: append([]string{f.Topic}, o.Topics...), ackTimeout: ackTimeout,
		window: int32(window), leases: make(map[string]*lease)}
	s.mu.Lock()
	switch {
	case s.ended:
		s.mu.Unlock()
		return facade.ErrClosed
	case s.subs[key] != nil:
		s.mu.Unlock()
		return wire.Errorf(wire.CodeAlreadySubscribed, "already subscribed to %s as %s", f.Topic, f.Group)
	case len(s.subs)+len(s.lives) >= cfg.MaxSubscriptions:
		s.mu.Unlock()
		return wire.Errorf(wire.CodeBadRequest, "subscription limit (%d) reached", cfg.MaxSubscriptions)
	}
	s.subs[key] = sub
	s.mu.Unlock()

	ctx, cancel := s.reqCtx()
	defer cancel()
	// The bus's creations (the topic's stream, the group) count against
	// the principal's quotas; the subscription itself is counted here,
	// per connection, since members are shared.
	release, err := s.gw.holdSubscription(ctx, s.principal)
	if err != nil {
		s.mu.Lock()
		if s.subs[key] == sub {
			delete(s.subs, key)
		}
		s.mu.Unlock()
		return err
	}
	s.mu.Lock()
	sub.release = release
	s.mu.Unlock()
	ctx = s.gw.bind(ctx, s.principal)
	var members []*member
	seen := map[string]bool{}
	for _, t := range sub.topics {
		if seen[t] {
			continue
		}
		seen[t] = true
		var m *member
		if m, err = s.gw.join(ctx, sub, t, bo); err != nil {
			break
		}
		members = append(members, m)
	}
	s.mu.Lock()
	sub.members = members
	if err == nil && sub.stopped {
		err = facade.ErrClosed // the session ended meanwhile
	}
	if err != nil {
		if s.subs[key] == sub {
			delete(s.subs, key)
		}
		s.detachLocked(sub)
		if sub.left {
			// The session ended while it joined: it released the
			// quota, but had no members to leave yet.
			s.mu.Unlock()
			for _, m := range members {
				s.gw.leave(m, sub)
			}
			return err
		}
		s.mu.Unlock()
		s.stopBusSub(sub)
		return err
	}
	s.mu.Unlock()
	s.sendOK(f.Corr)
	for _, m := range members {
		m.attach(sub)
	}
	return nil
}

// deliver sends one event of sub to the client and leases it. It runs on a
// bus goroutine and never blocks: a client whose queue is full is
// disconnected and the lease, still in the table, is handed back.
func (s *session) deliver(sub *subscription, d facade.Delivery) {
	e := d.Event()
	if err := leaseFor(s.ctx, d, sub.ackTimeout); leaseEnded(err) {
		// Its lease at the store ended before it could be sent: the
		// store redelivers it; an EVENT now could never be acknowledged.
		sub.freed()
		return
	}
	buf := getBuf()
	*buf = wire.AppendEvent((*buf)[:0], sub.key.topic, sub.key.group, e, d.Attempt(), sub.ackTimeout.Milliseconds())
	s.mu.Lock()
	if sub.stopped {
		// Unsubscribing or ending: the event never reaches the client.
		s.mu.Unlock()
		putBuf(buf)
		sub.freed()
		s.gw.giveBack(d, false, "unsubscribed")
		return
	}
	l := sub.leases[e.ID]
	if l != nil {
		// A redelivery of an event still in flight here supersedes the
		// old lease: one id is never in flight twice on a subscription.
		// The old delivery's lease ended at the store already.
		l.d = d
		sub.held.Add(-1) // the old lease's slot is the new one's
	} else {
		l = &lease{sub: sub, d: d, id: e.ID}
		sub.leases[e.ID] = l
	}
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
	d.AfterExpire(func() { s.expireLease(l, d) })
	if res == queueFull {
		s.slow()
	}
}

// expireLease drops l when its delivery d ended without the client
// settling it (its deadline passed, the store redelivered it, or the bus
// handed it back): a client's ACK of it is then refused (unknown_id). The
// bus hands the event back to the group.
func (s *session) expireLease(l *lease, d facade.Delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.sub.leases[l.id] == l && l.d == d {
		delete(l.sub.leases, l.id)
		l.sub.freed()
	}
}

// detachLocked stops sub's deliveries and removes its leases, returning
// them.
func (s *session) detachLocked(sub *subscription) []*lease {
	sub.stopped = true
	sub.closed.Store(true)
	for _, m := range sub.members {
		m.wake()
	}
	out := make([]*lease, 0, len(sub.leases))
	for _, l := range sub.leases {
		out = append(out, l)
	}
	clear(sub.leases)
	return out
}

// stopSub hands sub's leases back, then stops its bus subscription.
func (s *session) stopSub(sub *subscription, leases []*lease, reason string) {
	for _, l := range leases {
		s.gw.giveBack(l.d, true, reason)
	}
	s.stopBusSub(sub)
}

// endSub is stopSub for a session whose connection is gone: events whose
// EVENT frame was never written are released without spending an attempt
// (the client never saw them); the others are handed back as attempts.
func (s *session) endSub(sub *subscription, leases []*lease, reason string) {
	written := s.t.Written()
	for _, l := range leases {
		s.gw.giveBack(l.d, l.frame <= written, reason)
	}
	s.stopBusSub(sub)
}

// stopBusSub detaches sub from the gateway's members of its group and
// gives its quota back, once.
func (s *session) stopBusSub(sub *subscription) {
	s.mu.Lock()
	if sub.left {
		s.mu.Unlock()
		return
	}
	sub.left = true
	members, release := sub.members, sub.release
	s.mu.Unlock()
	for _, m := range members {
		s.gw.leave(m, sub)
	}
	if release != nil {
		release()
	}
}

func (s *session) unsubscribe(f *wire.Frame) error {
	if f.Group == "" {
		return s.unsubscribeLive(f)
	}
	key := subKey{f.Topic, f.Group}
	s.mu.Lock()
	sub := s.subs[key]
	if sub == nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s/%s", wire.ErrNotSubscribed, f.Topic, f.Group)
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
func (s *session) settle(f *wire.Frame) error {
	if f.ID == "" {
		return wire.Errorf(wire.CodeBadRequest, "%s needs an id", f.Op)
	}
	if f.Op == wire.OpModAck && f.ExtendMs < 0 {
		return wire.Errorf(wire.CodeBadRequest, "extend_ms must not be negative")
	}
	key := subKey{f.Topic, f.Group}
	s.mu.Lock()
	sub := s.subs[key]
	if sub == nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s/%s", wire.ErrNotSubscribed, f.Topic, f.Group)
	}
	l := sub.leases[f.ID]
	if l == nil || (f.Attempt != 0 && f.Attempt != l.d.Attempt()) {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s is not in flight on %s/%s (never delivered, already settled, or its lease expired)", facade.ErrUnknownID, f.ID, f.Topic, f.Group)
	}
	if f.Op == wire.OpModAck {
		d := l.d
		s.mu.Unlock()
		return s.modAck(f, sub, l, d)
	}
	delete(sub.leases, f.ID)
	sub.freed()
	s.mu.Unlock()

	// Settling is a fire-and-forget message to the store: no timeout
	// context per frame (it would be the hot path's biggest allocation).
	var err error
	if f.Op == wire.OpAck {
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
	if leaseEnded(err) {
		return fmt.Errorf("%w: lease of %s ended: %w", facade.ErrUnknownID, id, err)
	}
	return err
}

// leaseEnded reports whether err says the delivery was settled meanwhile:
// its deadline passed at the store, or its subscription stopped.
func leaseEnded(err error) bool {
	return errors.Is(err, facade.ErrExpired) || errors.Is(err, facade.ErrSettled) || errors.Is(err, facade.ErrClosed)
}

// modAck moves the lease, the delivery's deadline, to now + max(1s,
// extend_ms, or the subscription's ack timeout when extend_ms is absent),
// at most MaxAckTimeout.
func (s *session) modAck(f *wire.Frame, sub *subscription, l *lease, d facade.Delivery) error {
	by := time.Duration(f.ExtendMs) * time.Millisecond
	if f.ExtendMs == 0 {
		by = sub.ackTimeout
	}
	by = min(max(by, time.Second), s.gw.cfg.MaxAckTimeout)
	ctx, cancel := s.reqCtx()
	defer cancel()
	if err := d.Extend(ctx, by); err != nil {
		return leaseErr(err, f.ID)
	}
	s.mu.Lock()
	current := sub.leases[f.ID] == l && l.d == d
	s.mu.Unlock()
	if !current {
		// It expired (and was handed back), or the store redelivered it
		// (the lease now holds a new delivery, which this did not
		// extend), while the store extended it.
		return fmt.Errorf("%w: lease of %s expired", facade.ErrUnknownID, f.ID)
	}
	if f.Corr != "" {
		s.sendOK(f.Corr)
	}
	return nil
}

func (s *session) publish(f *wire.Frame) error {
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
	if err := wire.DecodeOpts(f.Opts, &o); err != nil {
		return err
	}
	if err := s.gw.limitPublish(s.principal, f.Topic, len(f.Payload)); err != nil {
		return err
	}
	ctx, cancel := s.reqCtx()
	defer cancel()
	ctx = s.gw.bind(ctx, s.principal)
	if f.Trace != nil {
		ctx = facade.ContextWithTrace(ctx, *f.Trace)
	}
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
	s.sendPublishOK(f.Corr, rec)
	return nil
}

func (s *session) publishWaiter() {
	defer close(s.pubDone)
	for p := range s.pubs {
		ctx, cancel := s.reqCtx()
		rec, err := p.fut.Wait(ctx)
		cancel()
		if err != nil {
			s.replyErr(p.corr, err, wire.CodePublishFailed)
			continue
		}
		s.sendPublishOK(p.corr, rec)
	}
}

func (s *session) cursor(f *wire.Frame) error {
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
	b, err := wire.Encode(&wire.Frame{Op: wire.OpOK, Corr: f.Corr, Cursor: c})
	if err != nil {
		return err
	}
	s.send(&b)
	return nil
}

func (s *session) seek(f *wire.Frame) error {
	if err := validTopicGroup(f); err != nil {
		return err
	}
	if err := s.allow(ActionSubscribe, f.Topic, f.Group); err != nil {
		return err
	}
	if f.Cursor == nil {
		return wire.Errorf(wire.CodeBadRequest, `SEEK needs a cursor ({} for the beginning)`)
	}
	c := *f.Cursor
	c.Topic = f.Topic
	ctx, cancel := s.reqCtx()
	defer cancel()
	// Seeking a group that does not exist creates it (and the topic's
	// stream): that counts against the principal's quotas.
	ctx = s.gw.bind(ctx, s.principal)
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
	lives := make([]*liveSub, 0, len(s.lives))
	for _, ls := range s.lives {
		if ls != nil {
			lives = append(lives, ls)
		}
	}
	clear(s.lives)
	s.authTimer.Stop()
	if s.expTimer != nil {
		s.expTimer.Stop()
	}
	s.mu.Unlock()

	for _, ls := range lives {
		s.gw.unfollow(ls)
	}
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
