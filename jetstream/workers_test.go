package jetstream_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
)

// The acks of events whose handlers returned are sent by the time Stop
// returns, even when they all return at once just before it: the group's
// cursor then reaches the last event with no member left to take one
// again.
func TestStopSendsHandlersAcks(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{})
	const n = 200
	for range n {
		pub(t, b, "acks.t", `1`, "")
	}
	var entered, returned atomic.Int64
	release := make(chan struct{})
	sub, err := b.Subscribe(t.Context(), "acks.t", "g", func(context.Context, facade.Delivery) error {
		entered.Add(1)
		<-release
		returned.Add(1)
		return nil
	}, facade.SubscribeOptions{From: facade.FromEarliest, MaxInFlight: n})
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		if got := entered.Load(); got < n {
			return fmt.Errorf("%d of %d handlers running", got, n)
		}
		return nil
	})
	close(release)
	if err := sub.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := returned.Load(); got != n {
		t.Fatalf("Stop returned with %d of %d handlers done", got, n)
	}
	testutil.CheckFor(t, 5*time.Second, func() error {
		c, err := b.GetCursor(t.Context(), "acks.t", "g")
		if err != nil {
			return err
		}
		if c.LastSeq != n {
			return fmt.Errorf("cursor at %d, want %d", c.LastSeq, n)
		}
		return nil
	})
}

// Handler calls run concurrently up to MaxInFlight: a call that waits for
// all the others holds none of them back, whichever goroutine runs it.
func TestHandlersRunConcurrently(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{})
	const n = 50
	for range n {
		pub(t, b, "workers.t", `1`, "")
	}
	var started atomic.Int64
	all := make(chan struct{})
	var done atomic.Int64
	sub, err := b.Subscribe(t.Context(), "workers.t", "g", func(ctx context.Context, _ facade.Delivery) error {
		if started.Add(1) == n {
			close(all)
		}
		select {
		case <-all:
		case <-ctx.Done():
			return ctx.Err()
		}
		done.Add(1)
		return nil
	}, facade.SubscribeOptions{From: facade.FromEarliest, MaxInFlight: n})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop(context.Background())
	testutil.CheckFor(t, 10*time.Second, func() error {
		if got := done.Load(); got < n {
			return fmt.Errorf("%d of %d handlers returned (%d started)", got, n, started.Load())
		}
		return nil
	})
}

// Every delivery reaches its handler while workers come and go: calls of
// mixed lengths keep some workers busy, others idle or ending.
func TestWorkersChurn(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{})
	const n = 2000
	for i := range n {
		pub(t, b, "workers.churn", fmt.Sprint(i), "")
	}
	var done atomic.Int64
	sub, err := b.Subscribe(t.Context(), "workers.churn", "g", func(_ context.Context, d facade.Delivery) error {
		if d.Event().Seq%50 == 0 {
			time.Sleep(2 * time.Millisecond) // a long call now and then
		}
		done.Add(1)
		return nil
	}, facade.SubscribeOptions{From: facade.FromEarliest, MaxInFlight: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop(context.Background())
	testutil.CheckFor(t, 30*time.Second, func() error {
		if got := done.Load(); got < n {
			return fmt.Errorf("%d of %d handled", got, n)
		}
		return nil
	})
}
