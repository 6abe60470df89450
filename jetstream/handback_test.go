package jetstream_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/internal/testutil"
)

// A member that stops hands back the events it fetched and did not start
// once each: the next member gets them on their second delivery. Handed
// back while the stopping member's pull request still stood, they would
// come straight back to it, round after round, and the next member would
// count every round as a failed attempt (dead-lettering them past
// MaxAttempts).
func TestStopHandsBackOnce(t *testing.T) {
	for _, orderBy := range []string{"", facade.OrderByKey} {
		t.Run("orderBy="+orderBy, func(t *testing.T) {
			srv := natstest.RunEmbedded(t)
			a, _ := hubOn(t, srv)
			b, _ := hubOn(t, srv)
			const topic, group, n = "handback.t", "g", 100
			publishKeyed(t, a, topic, []string{"k"}, 0, n)
			opts := facade.SubscribeOptions{From: facade.FromEarliest, OrderBy: orderBy, MaxInFlight: 1, MaxAttempts: 3}
			entered := make(chan uint64, n)
			sub, err := a.Subscribe(t.Context(), topic, group, func(ctx context.Context, d facade.Delivery) error {
				entered <- d.Event().Seq
				<-ctx.Done() // holds its slot until the member stops
				return nil
			}, opts)
			if err != nil {
				t.Fatal(err)
			}
			handledByA := map[uint64]bool{}
			select {
			case seq := <-entered:
				handledByA[seq] = true
			case <-time.After(10 * time.Second):
				t.Fatal("no event reached the first member")
			}
			if err := sub.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
			close(entered)
			for seq := range entered {
				handledByA[seq] = true
			}

			var mu sync.Mutex
			attempts := map[uint64]int{}
			if _, err := b.Subscribe(t.Context(), topic, group, func(_ context.Context, d facade.Delivery) error {
				mu.Lock()
				defer mu.Unlock()
				attempts[d.Event().Seq] = max(attempts[d.Event().Seq], d.Attempt())
				return nil
			}, opts); err != nil {
				t.Fatal(err)
			}
			testutil.CheckFor(t, 20*time.Second, func() error {
				c, err := b.GetCursor(t.Context(), topic, group)
				if err != nil {
					return err
				}
				if c.LastSeq != n {
					return fmt.Errorf("cursor at %d, want %d", c.LastSeq, n)
				}
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			for seq := uint64(1); seq <= n; seq++ {
				if at := attempts[seq]; at > 2 || at == 0 && !handledByA[seq] {
					t.Errorf("event %d reached the second member on attempt %d, want 1 or 2", seq, at)
				}
			}
		})
	}
}
