package jetstream

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventhub/eventhub/facade"
)

var (
	_ facade.Delivery = (*delivery)(nil)
	_ facade.Releaser = (*delivery)(nil)
)

// deliveryState is where a delivery is in its life: live until the first
// settlement.
type deliveryState uint8

const (
	live      deliveryState = iota
	settled                 // acked, nacked, released or dead-lettered
	expired                 // its deadline passed; handed back
	handedOff               // its subscription stopped; handed back
)

// delivery is one delivery of an event to a member: the handle its handler
// (and, for ManualAck, the caller) settles. It holds one of the member's
// in-flight slots until it is settled.
type delivery struct {
	s       *subscription
	msg     jetstream.Msg
	rec     *facade.EventRecord
	key     releaseKey
	attempt int
	span    trace.Span // nil when the bus does not trace; set before d is shared

	mu       sync.Mutex
	state    deliveryState
	deadline time.Time
	// store is when the store redelivers the event unless told otherwise:
	// later than deadline when the group's ack wait is longer than the
	// member's ack timeout, or Extend shortened the lease of a ManualAck
	// delivery; the hub then hands the event back itself at deadline.
	store    time.Time
	onExpire func() // AfterExpire's

	// Ordered groups' keyOrder, guarded by its mu: when it was fetched,
	// and whether it waits for a slot.
	parkedAt time.Time
	queued   bool

	// The bus's expiry heap (ManualAck deliveries only), guarded by its mu.
	hidx  int // -1: not in the heap
	hwhen time.Time
}

func (d *delivery) Event() *facade.EventRecord { return d.rec }
func (d *delivery) Group() string              { return d.s.group }
func (d *delivery) Attempt() int               { return d.attempt }
func (d *delivery) MaxAttempts() int           { return d.s.opts.MaxAttempts }

func (d *delivery) Deadline() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.deadline
}

// finish moves a live delivery to state to, frees its slot and takes it
// out of the expiry heap. Only the first call succeeds; later ones get the
// error that says what settled it.
func (d *delivery) finish(to deliveryState) error {
	d.mu.Lock()
	st, f := d.state, d.onExpire
	if st == live {
		d.state = to
	}
	d.mu.Unlock()
	if st != live {
		return d.settledErr(st)
	}
	if to != settled && f != nil {
		go f()
	}
	if d.s.opts.ManualAck {
		d.s.b.expiry.remove(d) // only ManualAck deliveries are timed there
	}
	d.s.release(d)
	return nil
}

func (d *delivery) settledErr(st deliveryState) error {
	switch st {
	case expired:
		return fmt.Errorf("%w: %s of %s/%s passed its deadline and was handed back", facade.ErrExpired, d.rec.ID, d.rec.Topic, d.s.group)
	case handedOff:
		return fmt.Errorf("%w: the subscription of %s/%s stopped and handed %s back", facade.ErrClosed, d.rec.Topic, d.s.group, d.rec.ID)
	}
	return fmt.Errorf("%w: %s of %s/%s", facade.ErrSettled, d.rec.ID, d.rec.Topic, d.s.group)
}

// Ack implements [facade.Delivery].
func (d *delivery) Ack(ctx context.Context) error {
	if err := d.finish(settled); err != nil {
		return err
	}
	d.endSpan("ack")
	return d.s.ack(d)
}

// Nack implements [facade.Delivery]: the event is redelivered after the
// retry backoff, or dead-lettered when this was its last attempt.
func (d *delivery) Nack(ctx context.Context, reason string) error {
	if err := d.finish(settled); err != nil {
		return err
	}
	if reason == "" {
		reason = "nacked"
	}
	d.s.fail(d, reason)
	return nil
}

// Release implements [facade.Releaser]: the event goes back to the group
// without counting this delivery as an attempt. It is redelivered after
// the retry backoff (as a Nack would be, so that a member that is stopping
// does not get it back at once), to this or another member.
func (d *delivery) Release(ctx context.Context) error {
	if err := d.finish(settled); err != nil {
		return err
	}
	d.endSpan("release")
	d.s.b.released.add(d.key)
	if err := d.msg.NakWithDelay(d.s.b.cfg.RetryBackoff); err != nil {
		return fmt.Errorf("release %s: %w", d.rec.ID, translate(err))
	}
	return nil
}

// AfterExpire implements [facade.Delivery].
func (d *delivery) AfterExpire(f func()) {
	d.mu.Lock()
	st := d.state
	if st == live {
		d.onExpire = f
	}
	d.mu.Unlock()
	if st == expired || st == handedOff {
		go f()
	}
}

// Extend implements [facade.Delivery]: a NAK with a delay keeps the event
// pending and sets its redelivery time to exactly now + by, and a later
// ACK still counts. It is sent to the reply subject directly, because
// nats.go would mark the message as settled after NakWithDelay; the local
// deadline moves once the server was told. A ManualAck delivery, which the
// bus times itself, tells the store only when by reaches beyond the
// store's deadline: a shorter lease ends here and hands the event back.
func (d *delivery) Extend(ctx context.Context, by time.Duration) error {
	if by <= 0 {
		return fmt.Errorf("%w: extension must be positive", facade.ErrInvalidOption)
	}
	d.mu.Lock()
	st := d.state
	local := d.s.opts.ManualAck && time.Now().Add(by).Before(d.store)
	d.mu.Unlock()
	if st != live {
		return d.settledErr(st)
	}
	if !local {
		body := fmt.Appendf(nil, `-NAK {"delay": %d}`, by.Nanoseconds())
		if err := d.s.b.nc.Publish(d.msg.Reply(), body); err != nil {
			return fmt.Errorf("extend %s: %w", d.rec.ID, translate(err))
		}
	}
	deadline := time.Now().Add(by)
	d.mu.Lock()
	if d.state != live {
		st := d.state
		d.mu.Unlock()
		return d.settledErr(st)
	}
	d.deadline = deadline
	if !local {
		d.store = deadline
	}
	d.mu.Unlock()
	if d.s.opts.ManualAck {
		d.s.b.expiry.move(d, deadline)
	}
	return nil
}

// expire ends a ManualAck delivery whose deadline passed: it frees the
// slot, so that a stale Ack cannot settle a later delivery, and tells the
// holder (AfterExpire). The store redelivers the event on its own, at
// once, when its deadline for it is no later than this one (the group's
// ack wait is the member's, or Extend set it); only when the store waits
// longer is the event handed back here, as a nack is: after the group's
// retry delay. (A NAK after the store redelivered would hit the new
// delivery: acks name the stream sequence.)
func (d *delivery) expire(now time.Time) {
	d.mu.Lock()
	if d.state != live {
		d.mu.Unlock()
		return
	}
	if now.Before(d.deadline) { // extended meanwhile
		dl := d.deadline
		d.mu.Unlock()
		d.s.b.expiry.move(d, dl)
		return
	}
	d.state = expired
	handBack, f := d.store.After(d.deadline), d.onExpire
	d.mu.Unlock()
	d.endSpan("expired")
	if f != nil {
		go f()
	}
	d.s.release(d)
	d.s.obs.Nacked()
	if handBack {
		// Handed back by the hub, as a nack is: after the retry delay.
		_ = d.msg.NakWithDelay(d.s.retry.Load().Delay(d.attempt))
	}
}

// supersede ends d silently: a redelivery of its event to the same member
// took its slot over.
func (d *delivery) supersede() {
	d.mu.Lock()
	st, f := d.state, d.onExpire
	if st == live {
		d.state = expired
	}
	d.mu.Unlock()
	if st == live {
		d.endSpan("expired")
		if f != nil {
			go f()
		}
	}
	d.s.b.expiry.remove(d)
}

// expiryHeap is the bus's one clock for the deadlines of ManualAck
// deliveries: a heap by deadline and a timer set to the earliest.
type expiryHeap struct {
	mu     sync.Mutex
	h      deliveryHeap
	timer  *time.Timer
	at     time.Time // when the timer fires; zero when unset
	closed bool
}

// move sets d's deadline in the heap to when (adding it if it is not in).
func (x *expiryHeap) move(d *delivery, when time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return
	}
	d.hwhen = when
	if d.hidx >= 0 {
		heap.Fix(&x.h, d.hidx)
	} else {
		heap.Push(&x.h, d)
	}
	x.armLocked(when)
}

func (x *expiryHeap) remove(d *delivery) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if d.hidx >= 0 {
		heap.Remove(&x.h, d.hidx)
	}
}

func (x *expiryHeap) armLocked(when time.Time) {
	if !x.at.IsZero() && !when.Before(x.at) {
		return
	}
	x.at = when
	if x.timer == nil {
		x.timer = time.AfterFunc(time.Until(when), x.fire)
		return
	}
	x.timer.Reset(time.Until(when))
}

// fire expires every delivery whose deadline passed.
func (x *expiryHeap) fire() {
	now := time.Now()
	x.mu.Lock()
	x.at = time.Time{}
	var due []*delivery
	for len(x.h) > 0 && !x.h[0].hwhen.After(now) {
		due = append(due, heap.Pop(&x.h).(*delivery))
	}
	if len(x.h) > 0 && !x.closed {
		x.armLocked(x.h[0].hwhen)
	}
	x.mu.Unlock()
	for _, d := range due {
		d.expire(now)
	}
}

// close stops the clock; the bus's subscriptions hand their deliveries
// back as they stop.
func (x *expiryHeap) close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.closed = true
	if x.timer != nil {
		x.timer.Stop()
	}
}

// deliveryHeap orders deliveries by hwhen (container/heap).
type deliveryHeap []*delivery

func (h deliveryHeap) Len() int           { return len(h) }
func (h deliveryHeap) Less(i, j int) bool { return h[i].hwhen.Before(h[j].hwhen) }
func (h deliveryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx = i
	h[j].hidx = j
}
func (h *deliveryHeap) Push(x any) {
	d := x.(*delivery)
	d.hidx = len(*h)
	*h = append(*h, d)
}
func (h *deliveryHeap) Pop() any {
	old := *h
	n := len(old)
	d := old[n-1]
	old[n-1] = nil
	d.hidx = -1
	*h = old[:n-1]
	return d
}
