package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/limits"
	"github.com/eventhub/eventhub/wire"
)

// testLimiter counts every principal as "p".
type testLimiter struct{ l *limits.Limiter }

func (t testLimiter) Publish(_ Principal, topic string, size int) error {
	return t.l.Publish("p", topic, size)
}
func (t testLimiter) Bind(ctx context.Context, _ Principal) context.Context {
	return limits.WithPrincipal(limits.SubscriptionsCountedByCaller(ctx), "p")
}
func (t testLimiter) Subscribe(ctx context.Context, _ Principal) (func(), error) {
	return t.l.Subscribe(limits.WithPrincipal(ctx, "p"))
}
func (t testLimiter) ConnectIP(ip string) (func(), error) { return t.l.ConnectIP(ip) }
func (t testLimiter) Connect(Principal) (func(), error)   { return t.l.Connect("p") }

// limitedGateway is a gateway whose bus and connections lc limits.
func limitedGateway(t *testing.T, lc limits.Config) *testGateway {
	t.Helper()
	l, err := limits.New(lc)
	if err != nil {
		t.Fatal(err)
	}
	bus := newBus(t, func(oc *jetstream.OpenConfig) { oc.Bus.Guard = l })
	if err := l.Start(t.Context(), bus.JetStream(), limits.StartConfig{Memory: true}); err != nil {
		t.Fatal(err)
	}
	return newGateway(t, bus, Config{Limiter: testLimiter{l}})
}

// limitCodeCases are TestErrorCodes's cases of the limit codes.
func limitCodeCases() []struct {
	code string
	name string
	run  func(t *testing.T)
} {
	return []struct {
		code string
		name string
		run  func(t *testing.T)
	}{
		{wire.CodeRateLimited, "a publish over the bucket", func(t *testing.T) {
			g := limitedGateway(t, limits.Config{Rates: []limits.RateRule{{Events: 1, EventsBurst: 1}}})
			c := dialAuth(t, g.url, "")
			c.ok(wire.Frame{Op: wire.OpPublish, Corr: "1", Topic: "rl.t", Payload: []byte(`1`)})
			r := c.errCode(wire.Frame{Op: wire.OpPublish, Corr: "2", Topic: "rl.t", Payload: []byte(`2`)}, wire.CodeRateLimited)
			if r.RetryAfterMs <= 0 || r.RetryAfterMs > 1000 {
				t.Fatalf("retry_after_ms %d", r.RetryAfterMs)
			}
			c.ok(wire.Frame{Op: wire.OpAuth, Corr: "3"}) // still open
		}},
		{wire.CodeTopicQuota, "a second topic", func(t *testing.T) {
			g := limitedGateway(t, limits.Config{Quotas: limits.Quotas{Topics: 1}})
			c := dialAuth(t, g.url, "")
			c.ok(wire.Frame{Op: wire.OpPublish, Corr: "1", Topic: "tq.one", Payload: []byte(`1`)})
			c.errCode(wire.Frame{Op: wire.OpPublish, Corr: "2", Topic: "tq.two", Payload: []byte(`1`)}, wire.CodeTopicQuota)
			c.errCode(subscribeFrame("tq.three", "g", ""), wire.CodeTopicQuota)
			c.ok(wire.Frame{Op: wire.OpPublish, Corr: "3", Topic: "tq.one", Payload: []byte(`1`)})
		}},
		{wire.CodeGroupQuota, "a second group", func(t *testing.T) {
			g := limitedGateway(t, limits.Config{Quotas: limits.Quotas{Groups: 1}})
			c := dialAuth(t, g.url, "")
			c.ok(subscribeFrame("gq.t", "one", ""))
			c.errCode(subscribeFrame("gq.t", "two", ""), wire.CodeGroupQuota)
		}},
		{wire.CodeSubQuota, "a second subscription", func(t *testing.T) {
			g := limitedGateway(t, limits.Config{Quotas: limits.Quotas{Subscriptions: 1}})
			c := dialAuth(t, g.url, "")
			c.ok(subscribeFrame("sq.t", "one", ""))
			c.errCode(subscribeFrame("sq.t", "two", ""), wire.CodeSubQuota)
			c.ok(wire.Frame{Op: wire.OpUnsubscribe, Corr: "u", Topic: "sq.t", Group: "one"})
			testutil.CheckFor(t, 5*time.Second, func() error {
				r := c.request(subscribeFrame("sq.t", "two", ""))
				switch {
				case r.Op == wire.OpOK:
					return nil
				case r.Code != wire.CodeSubQuota:
					t.Fatalf("after UNSUBSCRIBE: %s %s", r.Code, r.Msg)
				}
				return fmt.Errorf("after UNSUBSCRIBE: %s %s", r.Code, r.Msg)
			})
		}},
		{wire.CodeConnQuota, "a second connection", func(t *testing.T) {
			g := limitedGateway(t, limits.Config{Quotas: limits.Quotas{Connections: 1}})
			dialAuth(t, g.url, "")
			c2 := dial(t, g.url)
			c2.send(wire.Frame{Op: wire.OpAuth, Corr: "a"})
			if got := c2.waitClose(5 * time.Second); got != wire.CloseQuota {
				t.Fatalf("principal over its quota: close %d, want %d", got, wire.CloseQuota)
			}
			ip := limitedGateway(t, limits.Config{ConnectionsPerIP: 1})
			dialAuth(t, ip.url, "")
			c4 := dial(t, ip.url) // the second from 127.0.0.1
			if got := c4.waitClose(5 * time.Second); got != wire.CloseQuota {
				t.Fatalf("address over its quota: close %d, want %d", got, wire.CloseQuota)
			}
		}},
	}
}
