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

// TestFollowRecoversAcrossAGatewayRestart: a live subscription whose
// gateway goes away resumes on the new one from the last event it saw:
// what was published meanwhile arrives once, in order, then live events.
func TestFollowRecoversAcrossAGatewayRestart(t *testing.T) {
	bus := newBus(t)
	c, gw := reconnectingClient(t, bus)
	ctx := context.Background()
	var mu sync.Mutex
	var got []*facade.EventRecord
	if _, err := c.Follow(ctx, "fol.t", facade.AfterNow, func(e *facade.EventRecord) {
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	publishRaw := func(n int) *facade.EventRecord {
		e, err := bus.Publish(ctx, "fol.t", json.RawMessage(fmt.Sprint(n)), facade.PublishOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	want := []*facade.EventRecord{publishRaw(0)}
	waitFor := func(n int) {
		t.Helper()
		testutil.CheckFor(t, 10*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(got) < n {
				return fmt.Errorf("%d of %d followed", len(got), n)
			}
			return nil
		})
	}
	waitFor(1)
	gw.stop() // the gateway goes away; events go on being stored
	for i := 1; i <= 5; i++ {
		want = append(want, publishRaw(i))
	}
	gw.restart()
	waitFor(6)
	want = append(want, publishRaw(6))
	waitFor(7)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("followed %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].ID != want[i].ID {
			t.Fatalf("event %d: %s, want %s", i, got[i].ID, want[i].ID)
		}
	}
}
