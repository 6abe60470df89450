package jetstream

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Groups ordered by key ([facade.OrderByKey]) are pinned consumers: one
// member in the whole cluster pulls at a time (JetStream's pinned-client
// priority policy), so one scheduler, that member's keyOrder, sees every
// event the group hands out. It starts an event only when no earlier event
// of its key is unsettled; later ones wait in the member, parked, their
// leases at the store kept alive. A member that stops pulling (it
// stopped, its hub died or lost its connection) loses the pin after
// PinnedTTL and another takes over; the new one first fences the keys the
// old one may still hold (see keyOrder.takeOver).

// priorityGroup is the one priority group of ordered groups' consumers.
const priorityGroup = "eventhub"

// headerPinID is the header in which JetStream names the pinned puller.
const headerPinID = "Nats-Pin-Id"

// pinnedTTL is how long an ordered group's pinned member may go without
// pulling before another takes over: a pulling member renews its pull
// every PullExpiry.
func (b *Bus) pinnedTTL() time.Duration { return 3 * b.cfg.PullExpiry }

// maxFenceScan bounds the pending window a member reads when it takes an
// ordered group over; a larger one holds every key back instead.
const maxFenceScan = 100_000

// keyOrder is the key scheduler of a member of an ordered group. Every
// event is added to it (the pull loop never waits on it, so the member
// keeps its pin); run starts the ones that may start, in stream order per
// key, as slots free up.
type keyOrder struct {
	s    *subscription
	wake chan struct{}
	wg   sync.WaitGroup // run and keepAlive

	mu sync.Mutex
	// keys are the sequences of each key that this member holds (running,
	// parked, or handed back and awaiting redelivery), in stream order;
	// only the first may run.
	keys   map[string][]uint64
	parked map[uint64]*delivery // fetched and not started
	ready  []uint64             // parked, free to start, waiting for a slot
	// Since the member took the group over: the sequences pending
	// elsewhere then, by key, and in all; fenceAll when they could not
	// be read. A key waits while an earlier sequence of it is fenced.
	pin       string
	fence     map[string][]uint64
	fenceSeqs map[uint64]bool
	fenceAll  bool
	fenceLeft int // pending sequences not yet seen again; 0 lifts the fence
	fenceEnd  *time.Timer
	closed    bool
}

func newKeyOrder(s *subscription) *keyOrder {
	o := &keyOrder{
		s: s, wake: make(chan struct{}, 1),
		keys: map[string][]uint64{}, parked: map[uint64]*delivery{},
	}
	o.wg.Go(o.run)
	o.wg.Go(o.keepAlive)
	return o
}

// add takes a fetched delivery. It never blocks on the handlers: a pull
// loop that waited for a slot could stop pulling for long enough to lose
// the pin. An event without a key is free to start at once.
func (o *keyOrder) add(d *delivery) {
	seq, key := d.rec.Seq, d.rec.Key
	s := o.s
	s.mu.Lock()
	if old := s.held[seq]; old != nil {
		// Redelivered while running here: the new delivery carries on.
		s.held[seq] = d
		s.mu.Unlock()
		old.supersede()
		o.launch(d)
		return
	}
	s.mu.Unlock()
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		o.handBack(d)
		return
	}
	if key != "" {
		q := o.keys[key]
		if i, found := slices.BinarySearch(q, seq); !found {
			o.keys[key] = slices.Insert(q, i, seq)
		}
	}
	if old := o.parked[seq]; old != nil {
		old.supersede() // a parked event's lease ran out after all
		d.queued = old.queued
	}
	d.parkedAt = time.Now()
	o.parked[seq] = d
	o.seen(seq, key) // after it is in place: seeing it may lift the fence
	if key == "" {
		o.queue(d)
	} else {
		o.advance(key)
	}
	o.mu.Unlock()
}

// done is told that d's event is settled for good (acknowledged or
// dead-lettered): the next event of its key may start.
func (o *keyOrder) done(d *delivery) {
	o.mu.Lock()
	defer o.mu.Unlock()
	q := o.keys[d.rec.Key]
	if i, found := slices.BinarySearch(q, d.rec.Seq); found {
		o.keys[d.rec.Key] = slices.Delete(q, i, i+1)
	}
	o.advance(d.rec.Key)
}

// advance queues the first event of key when it is parked and no earlier
// event of the key is pending elsewhere. o.mu is held.
func (o *keyOrder) advance(key string) {
	q := o.keys[key]
	if len(q) == 0 {
		delete(o.keys, key)
		return
	}
	first := q[0]
	if d := o.parked[first]; d != nil && !o.fenced(key, first) {
		o.queue(d)
	}
}

// queue makes parked d ready to start. o.mu is held.
func (o *keyOrder) queue(d *delivery) {
	if d.queued {
		return
	}
	d.queued = true
	o.ready = append(o.ready, d.rec.Seq)
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func (o *keyOrder) fenced(key string, seq uint64) bool {
	if o.fenceAll {
		return true
	}
	f := o.fence[key]
	return len(f) > 0 && f[0] < seq
}

// run starts ready events as slots free up, until the member stops
// pulling; then it hands back every event it did not start.
func (o *keyOrder) run() {
	s := o.s
	for {
		var slot chan struct{}
		o.mu.Lock()
		if len(o.ready) > 0 {
			slot = s.sem
		}
		o.mu.Unlock()
		select {
		case slot <- struct{}{}:
			var d *delivery
			o.mu.Lock()
			if len(o.ready) > 0 { // lostPin may have emptied it
				d = o.parked[o.ready[0]]
				delete(o.parked, o.ready[0])
				o.ready = o.ready[1:]
			}
			o.mu.Unlock()
			if d == nil || !o.start(d) {
				<-s.sem
			}
		case <-o.wake:
		case <-s.pullCtx.Done():
			o.close()
			return
		}
	}
}

// start runs d's handler in the slot run took for it; false when the
// member is stopping (d is handed back).
func (o *keyOrder) start(d *delivery) bool {
	s := o.s
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		o.handBack(d)
		return false
	}
	s.held[d.rec.Seq] = d
	s.mu.Unlock()
	s.obs.InFlight(1)
	if time.Since(d.parkedAt) > s.opts.AckTimeout()/10 {
		_ = d.msg.InProgress() // its whole lease starts now
	}
	o.launch(d)
	return true
}

// launch runs the handler of d, which holds a slot.
func (o *keyOrder) launch(d *delivery) {
	s := o.s
	now := time.Now()
	deadline := now.Add(s.opts.AckTimeout())
	d.mu.Lock()
	d.deadline = deadline
	d.store = now.Add(time.Duration(s.groupAckWait.Load()))
	d.mu.Unlock()
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		if d.finish(handedOff) == nil {
			o.handBack(d)
		}
		return
	}
	s.hwg.Add(1)
	s.mu.Unlock()
	if s.opts.ManualAck {
		// Handlers receive one delivery at a time, here on run's
		// goroutine, so the pull loop never waits for them.
		s.b.expiry.move(d, deadline)
		defer s.hwg.Done()
		s.handle(d)
		return
	}
	s.dispatch(d)
}

// keepAlive keeps the leases of parked events from running out at the
// store: they have not reached a handler yet.
func (o *keyOrder) keepAlive() {
	s := o.s
	every := max(time.Duration(s.groupAckWait.Load())/3, 50*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.pullCtx.Done():
			return
		}
		o.mu.Lock()
		msgs := make([]jetstream.Msg, 0, len(o.parked))
		for _, d := range o.parked {
			msgs = append(msgs, d.msg)
		}
		o.mu.Unlock()
		for _, m := range msgs {
			_ = m.InProgress()
		}
	}
}

// close hands every event not started back to the group.
func (o *keyOrder) close() {
	o.mu.Lock()
	o.closed = true
	parked := o.parked
	o.parked, o.ready = map[uint64]*delivery{}, nil
	if o.fenceEnd != nil {
		o.fenceEnd.Stop()
	}
	o.mu.Unlock()
	for _, d := range parked {
		o.handBack(d)
	}
}

// lostPin is told that another member pulls the group now: the events
// parked here go back to the group, to reach it.
func (o *keyOrder) lostPin() {
	o.mu.Lock()
	parked := o.parked
	o.parked, o.ready, o.pin = map[uint64]*delivery{}, nil, ""
	for key, q := range o.keys {
		o.keys[key] = slices.DeleteFunc(q, func(seq uint64) bool { return parked[seq] != nil })
		o.advance(key)
	}
	o.mu.Unlock()
	for _, d := range parked {
		o.handBack(d)
	}
}

// handBack returns an event that never reached a handler, uncounted.
func (o *keyOrder) handBack(d *delivery) {
	d.endSpan("handed_back")
	o.s.handBack(d.msg, d.key)
}

// takeOver runs when msg is the first event since this member was pinned
// (its pin id is new): the member that pulled before may have held events
// that are still pending, and their keys must wait until those are
// redelivered here and settled, or until the group's ack wait and pin
// timeout have passed (see window). It reads the pending
// window of the group (ack floor to last delivered sequence), headers only,
// and fences the keys of the sequences it does not hold itself. As many
// sequences as the group had pending are expected back; when all of them
// came, the rest of the window was acknowledged and the fence lifts.
func (o *keyOrder) takeOver(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata) {
	pin := msg.Headers().Get(headerPinID)
	o.mu.Lock()
	same := pin == o.pin
	o.mu.Unlock()
	if same {
		return
	}
	s := o.s
	ctx, cancel := s.b.withTimeout(ctx)
	defer cancel()
	window, pending, hold, err := o.window(ctx, meta)
	if err != nil {
		s.b.log.Warn("ordered group taken over without its pending window; holding keys for one ack wait", "topic", s.ti.topic, "group", s.group, "err", err)
	}
	s.mu.Lock()
	running := make(map[uint64]bool, len(s.held))
	for seq := range s.held {
		running[seq] = true
	}
	s.mu.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pin = pin
	// What this member holds is what runs or waits here; an event it
	// handed back (nacked, expired) is pending like any other, and fenced.
	for key, q := range o.keys {
		o.keys[key] = slices.DeleteFunc(q, func(seq uint64) bool { return !running[seq] && o.parked[seq] == nil })
		if len(o.keys[key]) == 0 {
			delete(o.keys, key)
		}
	}
	o.fence, o.fenceSeqs, o.fenceAll = map[string][]uint64{}, map[uint64]bool{}, err != nil
	o.fenceLeft = pending
	for seq, key := range window {
		if running[seq] || o.parked[seq] != nil {
			o.fenceLeft--
			continue
		}
		o.fenceSeqs[seq] = true
		if key != "" {
			o.fence[key] = append(o.fence[key], seq)
		}
	}
	for _, f := range o.fence {
		slices.Sort(f)
	}
	if o.fenceEnd != nil {
		o.fenceEnd.Stop()
	}
	o.fenceEnd = time.AfterFunc(hold, o.lift)
	if !o.fenceAll && o.fenceLeft <= 0 {
		o.liftLocked()
	}
}

// window reads the keys of the group's pending window, how many of its
// sequences are pending, and how long the fence may have to hold: the
// group's ack wait, and its pin timeout on top, because the member that
// lost the pin learns of it only at its next pull (within PinnedTTL) and
// may still start an event it had fetched, with a fresh lease, until then.
func (o *keyOrder) window(ctx context.Context, meta *jetstream.MsgMetadata) (map[uint64]string, int, time.Duration, error) {
	s := o.s
	hold := time.Duration(s.groupAckWait.Load()) + s.b.pinnedTTL()
	cons, err := s.b.js.Consumer(ctx, meta.Stream, meta.Consumer)
	if err != nil {
		return nil, 0, hold, translate(err)
	}
	info := cons.CachedInfo()
	hold = info.Config.AckWait + info.Config.PinnedTTL
	from, to := info.AckFloor.Stream+1, info.Delivered.Stream
	out := map[uint64]string{}
	if info.NumAckPending == 0 || to < from {
		return out, 0, hold, nil
	}
	if to-from >= maxFenceScan {
		return nil, 0, hold, errors.New("pending window too large to read")
	}
	keys, err := o.scan(ctx, from, to)
	return keys, info.NumAckPending, hold, err
}

// scan reads the keys of the group's events from sequence from to to.
func (o *keyOrder) scan(ctx context.Context, from, to uint64) (map[uint64]string, error) {
	oc, done, err := o.s.b.headerScan(ctx, o.s.ti, from)
	if err != nil {
		return nil, err
	}
	defer done()
	out := map[uint64]string{}
	for {
		batch, err := oc.FetchNoWait(512)
		if err != nil {
			return nil, translate(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			mm, err := m.Metadata()
			if err != nil {
				continue
			}
			if mm.Sequence.Stream > to {
				return out, nil
			}
			_, key := topicKey(m.Subject())
			out[mm.Sequence.Stream] = key
			if mm.Sequence.Stream == to {
				return out, nil
			}
		}
		if err := batch.Error(); err != nil {
			return nil, translate(err)
		}
		if n == 0 {
			return out, nil
		}
	}
}

// arrived is told of an event that came and was settled at once
// (filtered out, or dead-lettered on arrival): it is out of the fence.
func (o *keyOrder) arrived(seq uint64, key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen(seq, key)
}

// seen takes seq out of the fence: it is here now. o.mu is held.
func (o *keyOrder) seen(seq uint64, key string) {
	if !o.fenceSeqs[seq] {
		return
	}
	delete(o.fenceSeqs, seq)
	if f := o.fence[key]; len(f) > 0 {
		if i, found := slices.BinarySearch(f, seq); found {
			o.fence[key] = slices.Delete(f, i, i+1)
		}
	}
	o.fenceLeft--
	if !o.fenceAll && o.fenceLeft <= 0 {
		o.liftLocked()
	}
}

func (o *keyOrder) lift() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.liftLocked()
}

func (o *keyOrder) liftLocked() {
	if o.fenceEnd != nil {
		o.fenceEnd.Stop()
	}
	o.fence, o.fenceSeqs, o.fenceAll = nil, nil, false
	for key := range o.keys {
		o.advance(key)
	}
}

// unpin lets a standing-by member take the group over at once, not after
// PinnedTTL, when this member was the pinned one; it stopped and handed
// everything back.
func (o *keyOrder) unpin(ctx context.Context) {
	o.mu.Lock()
	pinned := o.pin != ""
	o.mu.Unlock()
	if !pinned {
		return
	}
	s := o.s
	ctx, cancel := s.b.withTimeout(context.WithoutCancel(ctx))
	defer cancel()
	name := consumerNameFor(s.group, s.ti.topic, s.ti.shared)
	if err := s.ti.stream.UnpinConsumer(ctx, name, priorityGroup); err != nil {
		s.b.log.Debug("unpin", "topic", s.ti.topic, "group", s.group, "err", err)
	}
}
