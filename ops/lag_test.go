package ops_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/ops"
)

// TestLagAfterABurst reads /lag as an operator does while a group works
// through a burst: every event of the burst is lag at first, lagMs falls as
// the group moves through it, and both return to zero once it is consumed.
func TestLagAfterABurst(t *testing.T) {
	e := newEnv(t, jetstream.Config{}, ops.Config{})
	const topic, half = "burst.t", 500
	gate := make(chan struct{}, 2*half)
	sub, err := e.bus.Subscribe(t.Context(), topic, "worker", func(ctx context.Context, _ facade.Delivery) error {
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, facade.SubscribeOptions{From: facade.FromEarliest, MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop(context.Background())

	// The burst, in two halves stored at least 2 ms apart, so that the
	// second half's oldest event is younger than the first's.
	payload := func(i int) string { return fmt.Sprintf(`{"n":%d}`, i) }
	publishMany(t, e.bus, topic, half, payload)
	firstDone := time.Now()
	testutil.CheckFor(t, time.Second, func() error {
		if time.Since(firstDone) < 2*time.Millisecond {
			return fmt.Errorf("the clock has not moved 2 ms yet")
		}
		return nil
	})
	publishMany(t, e.bus, topic, half, payload)
	// lagMs is read against a fixed clock, a second after the burst.
	now := time.Now().Add(time.Second)
	e.now.Store(&now)

	lag := func() lagAnswer {
		var got lagAnswer
		e.getJSON(t, "/lag?topic="+topic+"&group=worker", &got)
		return got
	}
	start := lag()
	if start.Lag != 2*half || start.LagMs == nil || start.Oldest == nil || start.Oldest.Seq != 1 {
		t.Fatalf("before consuming: lag %d, lagMs %v, oldest %+v; want %d events from seq 1", start.Lag, start.LagMs, start.Oldest, 2*half)
	}
	if *start.LagMs < 1000 {
		t.Fatalf("before consuming: lagMs %d, want at least the 1000 ms since the burst", *start.LagMs)
	}

	// The first half consumed: the oldest unacknowledged event is the first
	// of the second half, stored later, so lagMs has fallen.
	for range half {
		gate <- struct{}{}
	}
	var mid lagAnswer
	testutil.CheckFor(t, 20*time.Second, func() error {
		if mid = lag(); mid.Lag != half {
			return fmt.Errorf("lag %d, want %d", mid.Lag, half)
		}
		return nil
	})
	if mid.Oldest == nil || mid.Oldest.Seq != half+1 || mid.LagMs == nil || *mid.LagMs >= *start.LagMs {
		t.Fatalf("half consumed: oldest %+v, lagMs %v; want seq %d and less than %d ms", mid.Oldest, mid.LagMs, half+1, *start.LagMs)
	}

	// All consumed: no lag in events or in time.
	for range half {
		gate <- struct{}{}
	}
	testutil.CheckFor(t, 20*time.Second, func() error {
		got := lag()
		if got.Lag != 0 || got.Pending != 0 || got.AckPending != 0 || got.LagMs == nil || *got.LagMs != 0 || got.Oldest != nil {
			return fmt.Errorf("lag %d (pending %d, ackPending %d), lagMs %v, oldest %+v; want all zero", got.Lag, got.Pending, got.AckPending, got.LagMs, got.Oldest)
		}
		if got.Cursor.LastSeq != 2*half {
			return fmt.Errorf("cursor at %d, want %d", got.Cursor.LastSeq, 2*half)
		}
		return nil
	})
}
