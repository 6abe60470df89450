package limits_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/limits"
)

func newLimiter(t testing.TB, c limits.Config) *limits.Limiter {
	t.Helper()
	l, err := limits.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     limits.Config
		wantErr error
	}{
		{name: "zero"},
		{name: "rate", cfg: limits.Config{Rates: []limits.RateRule{{Events: 10, Topic: "a.**"}}}},
		{name: "bad scope", cfg: limits.Config{Rates: []limits.RateRule{{Per: "tenant", Events: 1}}}, wantErr: limits.ErrInvalidConfig},
		{name: "bad pattern", cfg: limits.Config{Rates: []limits.RateRule{{Events: 1, Topic: "a..b"}}}, wantErr: limits.ErrInvalidConfig},
		{name: "no rate", cfg: limits.Config{Rates: []limits.RateRule{{Topic: "a"}}}, wantErr: limits.ErrInvalidConfig},
		{name: "negative quota", cfg: limits.Config{Quotas: limits.Quotas{Topics: -1}}, wantErr: limits.ErrInvalidConfig},
		{name: "override unlimited", cfg: limits.Config{Principals: []limits.PrincipalQuotas{{Subject: "ops", Quotas: limits.Quotas{Topics: -1}}}}},
		{name: "override without subject", cfg: limits.Config{Principals: []limits.PrincipalQuotas{{Quotas: limits.Quotas{Topics: 1}}}}, wantErr: limits.ErrInvalidConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestPublishRateLimits(t *testing.T) {
	var mu sync.Mutex
	throttled := map[string]int{}
	l := newLimiter(t, limits.Config{
		Rates: []limits.RateRule{
			// An override for one principal, listed before the default.
			{Principal: "bulk", Events: 1, EventsBurst: 5, Class: "bulk"},
			{Events: 1, EventsBurst: 2, Bytes: 1, BytesBurst: 100},
			{Per: limits.PerTopic, Topic: "hot.*", Events: 1, EventsBurst: 3, Class: "hot"},
		},
		OnThrottle: func(class, reason string) {
			mu.Lock()
			throttled[class+"/"+reason]++
			mu.Unlock()
		},
	})
	// The default: a burst of 2 events, then rate_limited with a wait
	// of about a second (1 event/s).
	for i := range 2 {
		if err := l.Publish("alice", "a.b", 10); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	err := l.Publish("alice", "a.b", 10)
	if !errors.Is(err, facade.ErrRateLimited) {
		t.Fatalf("third publish: %v, want rate_limited", err)
	}
	if d, ok := facade.RetryAfter(err); !ok || d < 500*time.Millisecond || d > time.Second {
		t.Fatalf("retry after %v (%v), want about 1s", d, ok)
	}
	// Another principal has its own buckets; the override has a larger one.
	if err := l.Publish("bob", "a.b", 10); err != nil {
		t.Fatalf("bob: %v", err)
	}
	for i := range 5 {
		if err := l.Publish("bulk", "a.b", 10); err != nil {
			t.Fatalf("bulk %d: %v", i, err)
		}
	}
	if err := l.Publish("bulk", "a.b", 10); !errors.Is(err, facade.ErrRateLimited) {
		t.Fatalf("bulk over its burst: %v", err)
	}
	// Bytes: 100 bytes of burst; a refused event takes nothing.
	if err := l.Publish("carol", "a.b", 90); err != nil {
		t.Fatal(err)
	}
	if err := l.Publish("carol", "a.b", 20); !errors.Is(err, facade.ErrRateLimited) {
		t.Fatalf("over the bytes burst: %v", err)
	}
	if err := l.Publish("carol", "a.b", 10); err != nil {
		t.Fatalf("the refused event took tokens: %v", err)
	}
	// Larger than the bytes burst: never passes.
	if err := l.Publish("dave", "a.b", 101); !errors.Is(err, facade.ErrTooLarge) {
		t.Fatalf("event above the burst: %v", err)
	}
	// The per-topic rule is shared by every principal.
	var n int
	for i := range 10 {
		if err := l.Publish(fmt.Sprintf("p%d", i), "hot.x", 1); err == nil {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("%d publishes to hot.* passed, want the topic burst of 3", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if throttled["default/events_rate"] != 1 || throttled["bulk/events_rate"] != 1 || throttled["default/bytes_rate"] != 2 || throttled["hot/events_rate"] != 7 {
		t.Fatalf("throttle counts %v", throttled)
	}
}

func TestConnectionAndSubscriptionQuotas(t *testing.T) {
	l := newLimiter(t, limits.Config{
		Quotas:           limits.Quotas{Connections: 2, Subscriptions: 1},
		Principals:       []limits.PrincipalQuotas{{Subject: "svc-*", Quotas: limits.Quotas{Connections: -1}}},
		ConnectionsPerIP: 1,
	})
	r1, err := l.Connect("alice")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.Connect("alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Connect("alice"); !errors.Is(err, facade.ErrConnectionQuota) {
		t.Fatalf("third connection: %v", err)
	}
	r1()
	r1() // releasing twice counts once
	if _, err := l.Connect("alice"); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if _, err := l.Connect("alice"); !errors.Is(err, facade.ErrConnectionQuota) {
		t.Fatalf("double release freed two slots: %v", err)
	}
	r2()
	for range 5 {
		if _, err := l.Connect("svc-ingest"); err != nil {
			t.Fatalf("unlimited override: %v", err)
		}
	}
	ip, err := l.ConnectIP("10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.ConnectIP("10.0.0.1"); !errors.Is(err, facade.ErrConnectionQuota) {
		t.Fatalf("second connection from one address: %v", err)
	}
	if _, err := l.ConnectIP("10.0.0.2"); err != nil {
		t.Fatal(err)
	}
	ip()
	ctx := limits.WithPrincipal(t.Context(), "alice")
	rs, err := l.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Subscribe(ctx); !errors.Is(err, facade.ErrSubscriptionQuota) {
		t.Fatalf("second subscription: %v", err)
	}
	if _, err := l.Subscribe(t.Context()); err != nil {
		t.Fatalf("no principal (the hub itself) is not limited: %v", err)
	}
	rs()
	if _, err := l.Subscribe(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestQuotasGlobalAcrossHubs runs two hubs' buses, each with its own
// Limiter, on one NATS server: the topic and group quotas count on both
// together, while the subscription quota is each hub's own.
func TestQuotasGlobalAcrossHubs(t *testing.T) {
	buses := quotaBuses(t, limits.Config{Quotas: limits.Quotas{Topics: 2, Groups: 2, Subscriptions: 2}}, 2)
	alice := limits.WithPrincipal(t.Context(), "alice")
	pub := func(b *jetstream.Bus, ctx context.Context, topic string) error {
		_, err := b.Publish(ctx, topic, []byte(`{}`), facade.PublishOptions{})
		return err
	}
	if err := pub(buses[0], alice, "q.one"); err != nil {
		t.Fatal(err)
	}
	if err := pub(buses[1], alice, "q.two"); err != nil {
		t.Fatal(err)
	}
	if err := pub(buses[0], alice, "q.one"); err != nil {
		t.Fatalf("publishing to a topic that exists creates nothing: %v", err)
	}
	if err := pub(buses[0], alice, "q.three"); !errors.Is(err, facade.ErrTopicQuota) {
		t.Fatalf("third topic on hub A: %v, want topic_quota", err)
	}
	if err := pub(buses[1], alice, "q.three"); !errors.Is(err, facade.ErrTopicQuota) {
		t.Fatalf("third topic on hub B: %v, want topic_quota", err)
	}
	if err := pub(buses[1], limits.WithPrincipal(t.Context(), "bob"), "q.three"); err != nil {
		t.Fatalf("another principal: %v", err)
	}
	if err := pub(buses[1], t.Context(), "q.four"); err != nil {
		t.Fatalf("the hub's own creations are not counted: %v", err)
	}

	h := func(context.Context, facade.Delivery) error { return nil }
	sub := func(b *jetstream.Bus, group string) (facade.Subscription, error) {
		return b.Subscribe(alice, "q.one", group, h, facade.SubscribeOptions{})
	}
	s1, err := sub(buses[0], "g1")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := sub(buses[1], "g2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub(buses[1], "g3"); !errors.Is(err, facade.ErrGroupQuota) {
		t.Fatalf("third group: %v, want group_quota", err)
	}
	// Joining an existing group creates nothing; hub A holds its second
	// subscription, hub B its second, and each hub counts its own.
	s3, err := sub(buses[0], "g2")
	if err != nil {
		t.Fatalf("joining a group: %v", err)
	}
	if _, err := sub(buses[0], "g1"); !errors.Is(err, facade.ErrSubscriptionQuota) {
		t.Fatalf("third subscription on hub A: %v, want subscription_quota", err)
	}
	s4, err := sub(buses[1], "g1")
	if err != nil {
		t.Fatalf("hub B's second subscription: %v", err)
	}
	// Ending a subscription gives its slot back.
	if err := s1.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	s5, err := sub(buses[0], "g1")
	if err != nil {
		t.Fatalf("after a stop: %v", err)
	}
	for _, s := range []facade.Subscription{s2, s3, s4, s5} {
		if err := s.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
