package jetstream

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
)

// TestGroupCreatedOncePositionedOnce: a member that finds the group already
// created (it lost the race to create it) must not move it again.
func TestGroupCreatedOncePositionedOnce(t *testing.T) {
	b, err := New(natstest.InProcessConn(t, natstest.RunEmbedded(t)), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	for range 6 {
		if _, err := b.Publish(ctx, "race.t", json.RawMessage(`1`), facade.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ti, err := b.topic(ctx, "race.t")
	if err != nil {
		t.Fatal(err)
	}
	o := facade.SubscribeOptions{}.WithDefaults()
	if _, _, err := b.createGroup(ctx, ti, "g", "g", o, 5); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.createGroup(ctx, ti, "g", "g", o, 2); err != nil {
		t.Fatal(err)
	}
	cur, err := b.GetCursor(ctx, "race.t", "g")
	if err != nil {
		t.Fatal(err)
	}
	if cur.LastSeq != 4 {
		t.Fatalf("the second creator moved the group: cursor at %d, want 4", cur.LastSeq)
	}
}

// TestAckWaitOnlyGrows: a member asking for a shorter ack timeout must not
// shorten the redelivery time of events other members hold.
func TestAckWaitOnlyGrows(t *testing.T) {
	b, err := New(natstest.InProcessConn(t, natstest.RunEmbedded(t)), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	nop := func(context.Context, facade.Delivery) error { return nil }
	for _, ms := range []int64{5000, 200} {
		unsub, err := b.Subscribe(ctx, "wait.t", "g", nop, facade.SubscribeOptions{ManualAck: true, AckTimeoutMs: ms})
		if err != nil {
			t.Fatal(err)
		}
		defer unsub.Stop(context.Background())
	}
	ti, _ := b.topic(ctx, "wait.t")
	cons, err := ti.stream.Consumer(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.CachedInfo().Config.AckWait; got != 5*time.Second {
		t.Fatalf("group AckWait %v after a member asked for 200ms, want 5s", got)
	}
}
