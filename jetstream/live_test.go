package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/jetstream"
)

// TestFollowFromNowAndFromAPosition: Follow delivers what is stored after
// the position (or after now), in order, with positions, and ends visibly
// with the bus.
func TestFollowFromNowAndFromAPosition(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{})
	first := pub(t, b, "live.f", `0`, "")
	got := make(chan *facade.EventRecord, 10)
	sub, err := b.Follow(t.Context(), "live.f", facade.AfterNow, func(e *facade.EventRecord) { got <- e })
	if err != nil {
		t.Fatal(err)
	}
	later := make(chan *facade.EventRecord, 10)
	sub2, err := b.Follow(t.Context(), "live.f", first.Seq-1, func(e *facade.EventRecord) { later <- e })
	if err != nil {
		t.Fatal(err)
	}
	second := pub(t, b, "live.f", `1`, "k")
	next := func(ch chan *facade.EventRecord) *facade.EventRecord {
		t.Helper()
		select {
		case e := <-ch:
			return e
		case <-time.After(5 * time.Second):
			t.Fatal("nothing followed")
			return nil
		}
	}
	if e := next(got); e.ID != second.ID || e.Seq != second.Seq || e.Key != "k" {
		t.Fatalf("followed from now: %+v, want %s at %d", e, second.ID, second.Seq)
	}
	if a, b := next(later), next(later); a.ID != first.ID || b.ID != second.ID {
		t.Fatalf("followed from a position: %s %s", a.ID, b.ID)
	}
	if err := sub2.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("follow still running after the bus closed")
	}
	if !errors.Is(sub.Err(), facade.ErrClosed) {
		t.Fatalf("Err %v, want ErrClosed", sub.Err())
	}
}

// TestReadAfter reads what a topic holds after a position, up to a limit,
// and says whether the stream still holds everything after it.
func TestReadAfter(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{})
	var sent []*facade.EventRecord
	for i := range 8 {
		sent = append(sent, pub(t, b, "live.r", fmt.Sprint(i), ""))
	}
	var ids []string
	res, err := b.ReadAfter(t.Context(), "live.r", sent[4].Seq, 100, func(e *facade.EventRecord) error {
		ids = append(ids, e.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete || res.Read != 3 || res.More || len(ids) != 3 || ids[0] != sent[5].ID || ids[2] != sent[7].ID {
		t.Fatalf("read after %d: %+v %v", sent[4].Seq, res, ids)
	}
	res, err = b.ReadAfter(t.Context(), "live.r", sent[4].Seq, 2, func(*facade.EventRecord) error { return nil })
	if err != nil || res.Read != 2 || !res.More {
		t.Fatalf("limited read: %+v %v", res, err)
	}
	// Three events are removed (as retention would): the read from
	// before them is not complete, and says where the stream starts.
	ti, err := b.LookupTopic(t.Context(), "live.r")
	if err != nil {
		t.Fatal(err)
	}
	if err := ti.Stream.Purge(t.Context(), njs.WithPurgeSequence(sent[3].Seq)); err != nil {
		t.Fatal(err)
	}
	res, err = b.ReadAfter(t.Context(), "live.r", sent[0].Seq, 100, func(*facade.EventRecord) error { return nil })
	if err != nil || res.Complete || res.First != sent[3].Seq || res.Read != 5 {
		t.Fatalf("read past retention: %+v %v", res, err)
	}
}

// TestSubscriptionEndsWithItsConnection: a group subscription on a
// borrowed connection that its owner closes ends on its own, visibly.
func TestSubscriptionEndsWithItsConnection(t *testing.T) {
	srv := natstest.RunEmbedded(t)
	nc := natstest.InProcessConn(t, srv)
	b, err := jetstream.New(nc, jetstream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	sub, err := b.Subscribe(t.Context(), "conn.t", "g", func(context.Context, facade.Delivery) error { return nil }, facade.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	select {
	case <-sub.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("subscription still running after its connection closed")
	}
	if !errors.Is(sub.Err(), facade.ErrClosed) {
		t.Fatalf("Err %v, want ErrClosed", sub.Err())
	}
}
