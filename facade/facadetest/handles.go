package facadetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
)

// Cases for the delivery and subscription handles.

// testManualAckFanIn settles, through their handles, deliveries of every
// topic of a fan-in subscription.
func testManualAckFanIn(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	other := topic + ".other"
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{Topics: []string{other}, ManualAck: true, AckTimeoutMs: 60_000})
	publish(t, b, topic, `{"n":1}`, facade.PublishOptions{})
	publish(t, b, other, `{"n":2}`, facade.PublishOptions{})
	got := c.take(t, 2)
	topics := []string{got[0].e.Topic, got[1].e.Topic}
	slices.Sort(topics)
	if !slices.Equal(topics, []string{topic, other}) {
		t.Fatalf("fan-in delivered topics %v", topics)
	}
	for _, r := range got {
		if err := r.d.Ack(t.Context()); err != nil {
			t.Fatalf("ack of %s on %s: %v", r.e.ID, r.e.Topic, err)
		}
	}
	c.quiet(t, 300*time.Millisecond)
}

// testSettleAfterExpiry: a delivery whose deadline passed is handed back
// (redelivered with the next attempt) and settling it then is refused.
func testSettleAfterExpiry(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{ManualAck: true, AckTimeoutMs: 1000})
	e := publish(t, b, topic, `{"n":1}`, facade.PublishOptions{})
	first := c.next(t)
	if first.e.ID != e.ID || first.d.Attempt() != 1 {
		t.Fatalf("first delivery %s attempt %d", first.e.ID, first.d.Attempt())
	}
	if dl := first.d.Deadline(); dl.IsZero() || time.Until(dl) > 2*time.Second {
		t.Fatalf("deadline %v, want about 1s from delivery", dl)
	}
	second := c.next(t) // redelivered once the lease ended
	if second.e.ID != e.ID || second.d.Attempt() != 2 {
		t.Fatalf("after expiry: %s attempt %d, want %s attempt 2", second.e.ID, second.d.Attempt(), e.ID)
	}
	if err := first.d.Ack(t.Context()); !errors.Is(err, facade.ErrExpired) {
		t.Fatalf("ack of the expired delivery: %v, want ErrExpired", err)
	}
	if err := second.d.Ack(t.Context()); err != nil {
		t.Fatalf("ack of the current delivery: %v", err)
	}
	c.quiet(t, 1500*time.Millisecond)
}

// testAfterExpire: AfterExpire tells the holder once a lease ended without
// a settlement, not before its deadline, and never after Ack.
func testAfterExpire(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{ManualAck: true, AckTimeoutMs: 1000})
	publish(t, b, topic, `{"n":1}`, facade.PublishOptions{})
	first := c.next(t)
	told := make(chan time.Time, 1)
	first.d.AfterExpire(func() { told <- time.Now() })
	select {
	case at := <-told:
		if early := first.d.Deadline().Sub(at); early > 50*time.Millisecond {
			t.Fatalf("told %v before the deadline", early)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the holder was not told that the lease expired")
	}
	second := c.next(t) // redelivered once the lease ended
	acked := make(chan struct{}, 1)
	second.d.AfterExpire(func() { acked <- struct{}{} })
	if err := second.d.Ack(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-acked:
		t.Fatal("told of an expiry after Ack")
	case <-time.After(1500 * time.Millisecond):
	}
}

// testExtend: Extend keeps a delivery past its first deadline.
func testExtend(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{ManualAck: true, AckTimeoutMs: 1000})
	publish(t, b, topic, `{"n":1}`, facade.PublishOptions{})
	r := c.next(t)
	if err := r.d.Extend(t.Context(), 4*time.Second); err != nil {
		t.Fatal(err)
	}
	if dl := r.d.Deadline(); time.Until(dl) < 3*time.Second {
		t.Fatalf("deadline %v after Extend(4s)", time.Until(dl))
	}
	c.quiet(t, 2*time.Second) // past the first deadline: not redelivered
	if err := r.d.Ack(t.Context()); err != nil {
		t.Fatalf("ack after extend: %v", err)
	}
	if err := r.d.Extend(t.Context(), time.Second); !errors.Is(err, facade.ErrSettled) {
		t.Fatalf("extend after ack: %v, want ErrSettled", err)
	}
}

// testDrain: Drain waits for the deliveries it made to be settled; Stop
// hands them back at once.
func testDrain(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	c := newCollector()
	sub := subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{ManualAck: true, AckTimeoutMs: 60_000})
	publish(t, b, topic, `{"n":1}`, facade.PublishOptions{})
	r := c.next(t)
	drained := make(chan error, 1)
	go func() { drained <- sub.Drain(t.Context()) }()
	select {
	case err := <-drained:
		t.Fatalf("Drain returned (%v) while a delivery was unsettled", err)
	case <-sub.Done():
		t.Fatal("subscription ended while a delivery was unsettled")
	case <-time.After(500 * time.Millisecond):
	}
	if err := r.d.Ack(t.Context()); err != nil {
		t.Fatalf("ack while draining: %v", err)
	}
	select {
	case err := <-drained:
		if err != nil {
			t.Fatalf("Drain: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Drain did not return after the last delivery was settled")
	}
	select {
	case <-sub.Done():
	default:
		t.Fatal("Done not closed after Drain")
	}
	if err := sub.Err(); err != nil {
		t.Fatalf("Err after Drain: %v, want nil", err)
	}
}

func testStop(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	c := newCollector()
	sub := subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{ManualAck: true, AckTimeoutMs: 60_000})
	e := publish(t, b, topic, `{"n":1}`, facade.PublishOptions{})
	r := c.next(t)
	if err := sub.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	if err := sub.Err(); err != nil {
		t.Fatalf("Err after Stop: %v, want nil", err)
	}
	if err := r.d.Ack(t.Context()); !errors.Is(err, facade.ErrClosed) {
		t.Fatalf("ack after Stop: %v, want ErrClosed", err)
	}
	// Handed back at once, not after the 60 s deadline.
	c2 := newCollector()
	subscribe(t, b, topic, group, c2.handle, facade.SubscribeOptions{AckTimeoutMs: 60_000})
	if got := c2.next(t); got.e.ID != e.ID {
		t.Fatalf("after Stop got %s, want %s", got.e.ID, e.ID)
	}
}

// testEndedByClose: a subscription whose bus (or connection) closes ends
// on its own, visibly.
func testEndedByClose(t *testing.T, env Env) {
	b := env.NewBus(t)
	closer, ok := b.(interface{ Close() error })
	if !ok {
		t.Skip("the bus has no Close")
	}
	topic, group := names(t)
	c := newCollector()
	sub := subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{})
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.Done():
	case <-time.After(waitTimeout):
		t.Fatal("subscription still running after its bus closed")
	}
	if err := sub.Err(); !errors.Is(err, facade.ErrClosed) {
		t.Fatalf("Err %v, want ErrClosed", err)
	}
	if _, err := b.Subscribe(t.Context(), topic, group, c.handle, facade.SubscribeOptions{}); err == nil {
		t.Fatal("subscribe on a closed bus succeeded")
	}
}

// testFollow: a live subscription gets what is stored after its position
// (or from now on), in order, with positions, and nothing once stopped.
func testFollow(t *testing.T, env Env) {
	b := env.NewBus(t)
	f, ok := b.(facade.Follower)
	if !ok {
		t.Skip("the bus cannot follow topics")
	}
	topic, _ := names(t)
	first := publish(t, b, topic, `{"n":0}`, facade.PublishOptions{})
	now := make(chan *facade.EventRecord, 100)
	from := make(chan *facade.EventRecord, 100)
	sub, err := f.Follow(t.Context(), topic, facade.AfterNow, func(e *facade.EventRecord) { now <- e })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Stop(context.Background()) })
	// Another bus: over WebSocket a connection follows a topic once.
	f2 := env.NewBus(t).(facade.Follower)
	sub2, err := f2.Follow(t.Context(), topic, first.Seq, func(e *facade.EventRecord) { from <- e })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub2.Stop(context.Background()) })
	sent := publishN(t, b, topic, 3)
	next := func(ch chan *facade.EventRecord) *facade.EventRecord {
		t.Helper()
		select {
		case e := <-ch:
			return e
		case <-time.After(waitTimeout):
			t.Fatal("nothing followed")
			return nil
		}
	}
	for _, ch := range []chan *facade.EventRecord{now, from} {
		for i, want := range sent {
			if e := next(ch); e.ID != want.ID || e.Seq != want.Seq {
				t.Fatalf("followed event %d: %s at %d, want %s at %d", i, e.ID, e.Seq, want.ID, want.Seq)
			}
		}
	}
	if err := sub.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	publish(t, b, topic, `{"n":9}`, facade.PublishOptions{})
	if e := next(from); e.Seq <= sent[2].Seq {
		t.Fatalf("after the stop the other follower got %d", e.Seq)
	}
	select {
	case e := <-now:
		t.Fatalf("stopped follower got %s", e.ID)
	case <-time.After(200 * time.Millisecond):
	}
}
