package limits_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/limits"
)

// quotaBuses starts n buses on one embedded server, each a hub with its own
// limiter of cfg: quotas they share through the server's KV.
func quotaBuses(t *testing.T, cfg limits.Config, n int) []*jetstream.Bus {
	srv := natstest.RunEmbedded(t)
	var buses []*jetstream.Bus
	for range n {
		l := newLimiter(t, cfg)
		b, err := jetstream.New(natstest.InProcessConn(t, srv), jetstream.Config{Guard: l, Storage: "memory"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		if err := l.Start(t.Context(), b.JetStream(), limits.StartConfig{Memory: true}); err != nil {
			t.Fatal(err)
		}
		buses = append(buses, b)
	}
	return buses
}

// TestGroupQuotaNotSpentByAFailedCreate: a group creation that fails
// after the quota was counted (a bad afterId) gives the count back.
func TestGroupQuotaNotSpentByAFailedCreate(t *testing.T) {
	buses := quotaBuses(t, limits.Config{Quotas: limits.Quotas{Groups: 1}}, 1)
	b := buses[0]
	alice := limits.WithPrincipal(t.Context(), "alice")
	if _, err := b.Publish(alice, "r.one", []byte(`{}`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, facade.Delivery) error { return nil }
	_, err := b.Subscribe(alice, "r.one", "g1", h, facade.SubscribeOptions{From: facade.FromAfterID, AfterID: "not-a-uuid"})
	if err == nil {
		t.Fatal("want the bad afterId refused")
	}
	s, err := b.Subscribe(alice, "r.one", "g1", h, facade.SubscribeOptions{})
	if err != nil {
		t.Fatalf("first group actually created is refused: %v", err)
	}
	_ = s.Stop(t.Context())
}

// TestTopicQuotaCountsATopicOnce: concurrent first publishes of one new
// topic by one principal, through two hubs, count it once.
func TestTopicQuotaCountsATopicOnce(t *testing.T) {
	buses := quotaBuses(t, limits.Config{Quotas: limits.Quotas{Topics: 3}}, 2)
	alice := limits.WithPrincipal(t.Context(), "alice")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := buses[i%2].Publish(alice, "r.same", []byte(`{}`), facade.PublishOptions{})
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, facade.ErrTopicQuota) {
			t.Logf("publish: %v", err)
		}
	}
	// One topic exists; two more may be created.
	for _, topic := range []string{"r.two", "r.three"} {
		if _, err := buses[0].Publish(alice, topic, []byte(`{}`), facade.PublishOptions{}); err != nil {
			t.Errorf("%s: %v (only 1 of 3 topics exist)", topic, err)
		}
	}
}
