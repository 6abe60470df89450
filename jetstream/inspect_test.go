package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/inspect"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
)

// A topic's groups are one set: Groups lists them, and Group, GetCursor and
// the group actions find each one by the name Groups gives it, whether the
// bus made its consumer or an operator made one on the topic's subjects (on
// a family stream, where the bus would name the consumer differently).
func TestGroupsIsTheOneSetOfGroups(t *testing.T) {
	b, nc := newBus(t, jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "inv.>", Stream: "INV"}}})
	ctx := t.Context()
	e1 := pub(t, b, "inv.orders", `1`, "")
	pub(t, b, "inv.orders", `2`, "")

	// A group of the bus, one event acknowledged.
	sub, err := b.Subscribe(ctx, "inv.orders", "billing", func(context.Context, facade.Delivery) error { return nil }, facade.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitCursor(t, b, "inv.orders", "billing", 2)
	_ = sub.Stop(ctx)

	// A consumer an operator made on the topic's subject, outside the hub.
	ti, err := b.LookupTopic(ctx, "inv.orders")
	if err != nil {
		t.Fatal(err)
	}
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, ti.StreamName, njs.ConsumerConfig{
		Durable: "audit", FilterSubject: "inv.orders", AckPolicy: njs.AckExplicitPolicy,
	}); err != nil {
		t.Fatal(err)
	}
	// A group of another topic of the family is not one of this topic's.
	pub(t, b, "inv.returns", `3`, "")
	if _, err := b.Subscribe(ctx, "inv.returns", "billing", func(context.Context, facade.Delivery) error { return nil }, facade.SubscribeOptions{}); err != nil {
		t.Fatal(err)
	}
	// An ordered consumer (no acks) is not a group.
	if _, err := js.OrderedConsumer(ctx, ti.StreamName, njs.OrderedConsumerConfig{}); err != nil {
		t.Fatal(err)
	}

	groups, err := b.Admin().Groups(ctx, "inv.orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || groups[0].Group != "audit" || groups[1].Group != "billing" {
		t.Fatalf("groups %+v, want audit and billing", groups)
	}
	if g := groups[1]; g.Cursor.LastSeq != 2 || g.Lag != 0 || g.Consumer == "" {
		t.Fatalf("billing %+v, want cursor 2, lag 0", g)
	}
	if g := groups[0]; g.Cursor.LastSeq != 0 || g.Pending != 2 || g.Lag != 2 {
		t.Fatalf("audit %+v, want cursor 0, 2 pending", g)
	}
	for _, g := range groups {
		c, err := b.GetCursor(ctx, "inv.orders", g.Group)
		if err != nil || c.LastSeq != g.Cursor.LastSeq {
			t.Fatalf("GetCursor(%s) = %+v, %v; Groups says %d", g.Group, c, err, g.Cursor.LastSeq)
		}
		one, err := b.Admin().Group(ctx, "inv.orders", g.Group)
		if err != nil || one.Consumer != g.Consumer {
			t.Fatalf("Group(%s) = %+v, %v", g.Group, one, err)
		}
	}
	if _, err := b.GetCursor(ctx, "inv.orders", "nobody"); !errors.Is(err, facade.ErrNotFound) {
		t.Fatalf("GetCursor of a missing group: %v", err)
	}

	g, err := b.Admin().SeekGroup(ctx, "inv.orders", "audit", e1.Seq+1)
	if err != nil || g.Pending != 1 {
		t.Fatalf("SeekGroup: %+v, %v; want 1 pending", g, err)
	}
	lag, err := b.Admin().GroupLag(ctx, "inv.orders", "audit")
	if err != nil || lag.Oldest == nil || lag.Oldest.Seq != 2 || lag.StreamLastSeq != 3 {
		t.Fatalf("GroupLag: %+v, %v; want oldest 2, stream tail 3", lag, err)
	}
	if err := b.Admin().DeleteGroup(ctx, "inv.orders", "audit"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Admin().Group(ctx, "inv.orders", "audit"); !errors.Is(err, facade.ErrNotFound) {
		t.Fatalf("Group after DeleteGroup: %v", err)
	}
}

func waitCursor(t *testing.T, b *jetstream.Bus, topic, group string, seq uint64) {
	t.Helper()
	testutil.CheckFor(t, 10*time.Second, func() error {
		c, err := b.GetCursor(t.Context(), topic, group)
		if err != nil {
			return err
		}
		if c.LastSeq != seq {
			return fmt.Errorf("cursor %d, want %d", c.LastSeq, seq)
		}
		return nil
	})
}

// On a family stream the event methods see one topic only: Event refuses
// another topic's sequence, Scan reads the topic's events (or one key's),
// Purge removes the topic's events and leaves its neighbour's, and
// DeleteEvent reports an event that is not there.
func TestEventMethodsStayInTheirTopic(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "ev.>", Stream: "EV"}}})
	ctx := t.Context()
	a1 := pub(t, b, "ev.a", `1`, "k1")
	other := pub(t, b, "ev.b", `2`, "")
	pub(t, b, "ev.a", `3`, "k2")
	pub(t, b, "ev.a", `4`, "")

	se, err := b.Admin().Event(ctx, "ev.a", a1.Seq)
	if err != nil || se.Event.ID != a1.ID || se.Event.Key != "k1" || se.Subject == "ev.a" || se.Headers == nil {
		t.Fatalf("Event(ev.a, %d) = %+v, %v", a1.Seq, se, err)
	}
	if _, err := b.Admin().Event(ctx, "ev.a", other.Seq); !errors.Is(err, facade.ErrNotFound) {
		t.Fatalf("Event of ev.b's sequence through ev.a: %v, want not found", err)
	}

	scan := func(key string) []string {
		var got []string
		_, end, err := b.Admin().Scan(ctx, "ev.a", inspectScan(key), func(se *inspect.StoredEvent) bool {
			got = append(got, string(se.Event.Payload))
			return true
		})
		if err != nil || !end {
			t.Fatalf("scan key %q: end %v, %v", key, end, err)
		}
		return got
	}
	if got := fmt.Sprint(scan("")); got != "[1 3 4]" {
		t.Fatalf("scan of ev.a: %s", got)
	}
	if got := fmt.Sprint(scan("k2")); got != "[3]" {
		t.Fatalf("scan of ev.a key k2: %s", got)
	}

	if n, err := b.Admin().Purge(ctx, "ev.a", "k1", 0); err != nil || n != 1 {
		t.Fatalf("purge of key k1: %d, %v", n, err)
	}
	if n, err := b.Admin().Purge(ctx, "ev.a", "", 0); err != nil || n != 2 {
		t.Fatalf("purge of ev.a: %d, %v", n, err)
	}
	if n, err := b.Admin().TopicCount(ctx, "ev.b"); err != nil || n != 1 {
		t.Fatalf("ev.b after purging ev.a: %d events, %v", n, err)
	}
	if err := b.Admin().DeleteEvent(ctx, "ev.a", a1.Seq); !errors.Is(err, facade.ErrNotFound) {
		t.Fatalf("delete of a purged event: %v, want not found", err)
	}
}

func inspectScan(key string) inspect.Scan { return inspect.Scan{Key: key, From: 1, Max: 100} }
