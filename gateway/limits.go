package gateway

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/eventhub/eventhub/facade"
)

// Limiter applies rate limits and quotas to the gateway's clients
// (package limits implements it for the hub). Its refusals are
// *facade.Error values: rate_limited (with RetryAfter), too_large,
// connection_quota. It must be safe for concurrent use and must not
// block.
type Limiter interface {
	// Publish takes one event of size payload bytes on topic from p's
	// rate limits, or refuses it.
	Publish(p Principal, topic string, size int) error
	// Bind returns ctx carrying p for the bus's own quotas (topics and
	// groups created). The gateway's bus subscriptions are shared by
	// connections, so they must not count against p: the gateway counts
	// each connection's subscriptions itself, with Subscribe.
	Bind(ctx context.Context, p Principal) context.Context
	// Subscribe admits one subscription of p (group or live) against
	// its subscription quota; release is called once when it ends.
	Subscribe(ctx context.Context, p Principal) (release func(), err error)
	// ConnectIP admits a WebSocket connection from address ip.
	ConnectIP(ip string) (release func(), err error)
	// Connect admits a WebSocket connection of p once it authenticated.
	Connect(p Principal) (release func(), err error)
}

// limitPublish asks the limiter, if any, about one publish.
func (g *Gateway) limitPublish(p Principal, topic string, size int) error {
	if g.cfg.Limiter == nil {
		return nil
	}
	return g.cfg.Limiter.Publish(p, topic, size)
}

// bind returns ctx carrying p, when a limiter needs it.
func (g *Gateway) bind(ctx context.Context, p Principal) context.Context {
	if g.cfg.Limiter == nil || p == nil {
		return ctx
	}
	return g.cfg.Limiter.Bind(ctx, p)
}

// holdSubscription counts one subscription of p, when a limiter needs it.
func (g *Gateway) holdSubscription(ctx context.Context, p Principal) (release func(), err error) {
	if g.cfg.Limiter == nil || p == nil {
		return func() {}, nil
	}
	return g.cfg.Limiter.Subscribe(ctx, p)
}

// admitIP admits a new WebSocket connection from r's address.
func (g *Gateway) admitIP(r *http.Request) (release func(), err error) {
	if g.cfg.Limiter == nil {
		return func() {}, nil
	}
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	return g.cfg.Limiter.ConnectIP(ip)
}

// admit counts the session's connection against p's quota, after
// releasing the count of the principal it had before (a re-AUTH: the same
// principal refreshing its token must not find its own connection in the
// way). Refused, the session ends. Reader goroutine only.
func (s *session) admit(p Principal) error {
	if s.gw.cfg.Limiter == nil {
		return nil
	}
	s.releaseLimits()
	release, err := s.gw.cfg.Limiter.Connect(p)
	if err != nil {
		return err
	}
	s.limitRelease = release
	return nil
}

// releaseLimits gives back what the session's principal holds. It is
// called by the reader, or once the reader stopped.
func (s *session) releaseLimits() {
	if s.limitRelease != nil {
		s.limitRelease()
		s.limitRelease = nil
	}
}

// retryAfterMs is the wait an error asks for, in whole milliseconds
// rounded up, or 0.
func retryAfterMs(err error) int64 {
	d, ok := facade.RetryAfter(err)
	if !ok || d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// setRetryAfter sets the Retry-After header (whole seconds, rounded up)
// of a rate_limited response.
func setRetryAfter(w http.ResponseWriter, err error) {
	if ms := retryAfterMs(err); ms > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt((ms+999)/1000, 10))
		w.Header().Set("Eventhub-Retry-After-Ms", strconv.FormatInt(ms, 10))
	}
}
