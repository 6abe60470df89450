package gateway

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/wire"
)

// TestTimelyAckUnderBackpressure: a client that acknowledges every event
// well within the ack deadline its EVENT frame advertised never gets
// unknown_id nor sees an event twice, while the events behind its window
// wait: in the member's pull buffer (the ack clock at the store runs
// there) and in dispatch, for a slot.
func TestTimelyAckUnderBackpressure(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{MaxInflightPerSub: 1})
	c := dialAuth(t, g.url, "")
	c.ok(subscribeFrame("bp.t", "g", `{"from":"earliest","ackTimeoutMs":1500}`))
	for range 4 {
		publish(t, bus, "bp.t", `1`)
	}
	seen := map[string]int{}
	deadline := time.Now().Add(12 * time.Second)
	for time.Now().Before(deadline) {
		ev, ok := c.await(2500*time.Millisecond, func(f wire.Frame) bool { return f.Op == wire.OpEvent })
		if !ok {
			break
		}
		seen[ev.Event.ID]++
		if seen[ev.Event.ID] > 1 {
			t.Errorf("event %s delivered again (attempt %d) although every ACK so far was on time", ev.Event.ID, ev.Ctx.Attempt)
		}
		// Work for 2/3 of the advertised lease, then ACK.
		time.Sleep(time.Duration(ev.Ctx.AckDeadlineMs) * time.Millisecond * 2 / 3)
		f := ackFrame(ev)
		f.Corr = ev.Event.ID
		if r := c.request(f); r.Op != wire.OpOK {
			t.Errorf("timely ACK of %s (attempt %d, advertised %d ms) refused: %s %s", ev.Event.ID, ev.Ctx.Attempt, ev.Ctx.AckDeadlineMs, r.Code, r.Msg)
		}
	}
	if len(seen) != 4 {
		t.Fatalf("%d of 4 events seen", len(seen))
	}
}

// fakeDelivery is a facade.Delivery whose Extend can be held.
type fakeDelivery struct {
	rec      *facade.EventRecord
	attempt  int
	mu       sync.Mutex
	deadline time.Time
	extended int
	acked    bool
	hold     chan struct{} // Extend waits for it when not nil
	entered  chan struct{}
}

func (d *fakeDelivery) Event() *facade.EventRecord { return d.rec }
func (d *fakeDelivery) Group() string              { return "g" }
func (d *fakeDelivery) Attempt() int               { return d.attempt }
func (d *fakeDelivery) MaxAttempts() int           { return 5 }
func (d *fakeDelivery) Deadline() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.deadline
}
func (d *fakeDelivery) Ack(context.Context) error {
	d.mu.Lock()
	d.acked = true
	d.mu.Unlock()
	return nil
}
func (d *fakeDelivery) Nack(context.Context, string) error { return nil }
func (d *fakeDelivery) AfterExpire(func())                 {}
func (d *fakeDelivery) Extend(_ context.Context, by time.Duration) error {
	if d.hold != nil {
		close(d.entered)
		<-d.hold
	}
	d.mu.Lock()
	d.deadline = time.Now().Add(by)
	d.extended++
	d.mu.Unlock()
	return nil
}

// TestModAckRacingARedelivery: a MODACK answered OK extended the delivery
// its lease holds. A redelivery of the event to the same subscription
// while the MODACK is on its way to the store puts a new delivery in the
// lease; the MODACK, which extended the old one, is then unknown_id.
func TestModAckRacingARedelivery(t *testing.T) {
	bus := newBus(t)
	s, ft := newTestSession(t, bus, Config{})
	s.handleFrame(t, wire.Frame{Op: wire.OpAuth})
	key := subKey{"m.t", "g"}
	sub := &subscription{s: s, key: key, topics: []string{"m.t"}, ackTimeout: 2 * time.Second, window: 10, leases: map[string]*lease{}}
	s.mu.Lock()
	s.subs[key] = sub
	s.mu.Unlock()
	rec := &facade.EventRecord{ID: "e1", Topic: "m.t", Payload: json.RawMessage(`1`)}
	d1 := &fakeDelivery{rec: rec, attempt: 1, deadline: time.Now().Add(2 * time.Second), hold: make(chan struct{}), entered: make(chan struct{})}
	sub.reserve()
	s.deliver(sub, d1)

	// The frame is encoded here: a failure ends the test on its own
	// goroutine, not on the one that handles the frame.
	modAck, err := wire.Encode(&wire.Frame{Op: wire.OpModAck, Corr: "x", Topic: "m.t", Group: "g", ID: "e1", ExtendMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.handle(modAck)
	}()
	<-d1.entered
	// The store redelivers e1 (attempt 2) to the same subscription meanwhile.
	d2 := &fakeDelivery{rec: rec, attempt: 2, deadline: time.Now().Add(2 * time.Second)}
	sub.reserve()
	s.deliver(sub, d2)
	close(d1.hold)
	<-done

	frames, _, _ := ft.snapshot()
	var ok bool
	for _, f := range frames {
		if f.Corr == "x" && f.Op == wire.OpOK {
			ok = true
		}
	}
	s.mu.Lock()
	l := sub.leases["e1"]
	s.mu.Unlock()
	if ok && l != nil && l.d == facade.Delivery(d2) && time.Until(d2.Deadline()) < 5*time.Second {
		t.Fatalf("MODACK answered OK, but the delivery its lease holds (attempt 2) expires at the store in %v: its ACK will be refused", time.Until(d2.Deadline()).Round(time.Millisecond))
	}
}
