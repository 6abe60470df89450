package hub

import (
	"context"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/gateway"
	"github.com/eventhub/eventhub/limits"
)

// Subjects that principals without a token subject are counted under.
const (
	anonymousSubject = "anonymous" // authentication off
)

// principalSubject is whom p's limits count: its token subject.
func principalSubject(p gateway.Principal) string {
	if id, ok := p.(*auth.Identity); ok {
		return id.Subject // "static-token" for the static token
	}
	return anonymousSubject
}

// gatewayLimiter adapts a *limits.Limiter to the gateway.
type gatewayLimiter struct{ l *limits.Limiter }

var _ gateway.Limiter = gatewayLimiter{}

func (g gatewayLimiter) Publish(p gateway.Principal, topic string, size int) error {
	return g.l.Publish(principalSubject(p), topic, size)
}

func (g gatewayLimiter) Bind(ctx context.Context, p gateway.Principal) context.Context {
	return limits.WithPrincipal(limits.SubscriptionsCountedByCaller(ctx), principalSubject(p))
}

func (g gatewayLimiter) Subscribe(ctx context.Context, p gateway.Principal) (func(), error) {
	return g.l.Subscribe(limits.WithPrincipal(ctx, principalSubject(p)))
}

func (g gatewayLimiter) ConnectIP(ip string) (func(), error) { return g.l.ConnectIP(ip) }

func (g gatewayLimiter) Connect(p gateway.Principal) (func(), error) {
	return g.l.Connect(principalSubject(p))
}

// startLimits applies the account's JetStream limits (embedded server)
// and opens the shared counters of the topic and group quotas.
func (h *Hub) startLimits(ctx context.Context) error {
	if srv := h.Bus.Server(); srv != nil {
		if err := limits.ApplyAccount(srv, h.cfg.Limits.Account); err != nil {
			return err
		}
	}
	if h.limiter == nil {
		return nil
	}
	return h.limiter.Start(ctx, h.Bus.JetStream(), limits.StartConfig{Memory: h.cfg.NATS.Memory || h.cfg.Bus.Storage == "memory"})
}
