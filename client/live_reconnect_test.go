package client

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
)

// TestFollowAfterNowReconnectBeforeTheFirstEvent: a Follow(AfterNow) whose
// connection drops before its first event gets what was published after
// it, and does not replay the topic's history after the reconnect.
func TestFollowAfterNowReconnectBeforeTheFirstEvent(t *testing.T) {
	bus := newBus(t)
	ctx := context.Background()
	pub := func(n int) *facade.EventRecord {
		e, err := bus.Publish(ctx, "fnow.t", json.RawMessage(fmt.Sprint(n)), facade.PublishOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for i := range 5 {
		pub(i) // history, before Follow
	}
	c, gw := reconnectingClient(t, bus)
	var mu sync.Mutex
	var got []*facade.EventRecord
	if _, err := c.Follow(ctx, "fnow.t", facade.AfterNow, func(e *facade.EventRecord) {
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	gw.stop()
	want := pub(100)
	gw.restart()
	// A second event after the reconnect: once it has arrived, everything
	// the follow was going to get before it has arrived too (in order).
	var marker *facade.EventRecord
	testutil.CheckFor(t, 10*time.Second, func() error {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 0 {
			return fmt.Errorf("nothing followed after the reconnect")
		}
		if marker == nil {
			marker = pub(101)
		}
		mu.Lock()
		defer mu.Unlock()
		if got[len(got)-1].ID != marker.ID {
			return fmt.Errorf("marker not followed yet")
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].ID != want.ID {
		seqs := []uint64{}
		for _, e := range got {
			seqs = append(seqs, e.Seq)
		}
		t.Fatalf("followed seqs %v after the reconnect, want only %d and %d (published after Follow)", seqs, want.Seq, marker.Seq)
	}
}
