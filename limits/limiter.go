package limits

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/pattern"
)

// Reasons of [Config.OnThrottle] (the metrics' reason label).
const (
	ReasonEvents        = "events_rate"
	ReasonBytes         = "bytes_rate"
	ReasonTopics        = "topic_quota"
	ReasonGroups        = "group_quota"
	ReasonSubscriptions = "subscription_quota"
	ReasonConnections   = "connection_quota"
	ReasonConnectionsIP = "connection_quota_ip"
)

// DefaultClass is the class of principals no rule or override names.
const DefaultClass = "default"

// Limiter enforces a [Config]. It is safe for concurrent use. A nil
// *Limiter limits nothing.
type Limiter struct {
	cfg   Config
	rules []rule

	mu      sync.Mutex
	buckets map[bucketKey]*buckets // per-principal rules' buckets
	conns   map[string]int         // connections per principal
	ipConns map[string]int         // connections per address
	subs    map[string]int         // subscriptions per principal

	counters atomic.Pointer[counters] // the global topic and group quotas
}

type rule struct {
	RateRule
	topic    pattern.Pattern
	anyTopic bool
	topicB   *buckets // PerTopic: the rule's one pair of buckets
}

type bucketKey struct {
	rule    int
	subject string
}

type buckets struct {
	events, bytes *rate.Limiter
}

// New returns a Limiter for cfg. The topic and group quotas take effect
// once [Limiter.Start] has given it the shared counters.
func New(cfg Config) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxTracked == 0 {
		cfg.MaxTracked = DefaultMaxTracked
	}
	l := &Limiter{
		cfg:     cfg,
		buckets: make(map[bucketKey]*buckets),
		conns:   make(map[string]int),
		ipConns: make(map[string]int),
		subs:    make(map[string]int),
	}
	for _, r := range cfg.Rates {
		cr := rule{RateRule: r, anyTopic: r.Topic == "" || r.Topic == "**"}
		if cr.Per == "" {
			cr.Per = PerPrincipal
		}
		if cr.Class == "" {
			cr.Class = DefaultClass
		}
		if !cr.anyTopic {
			cr.topic, _ = pattern.Compile(r.Topic) // checked by Validate
		}
		if cr.Per == PerTopic {
			cr.topicB = cr.newBuckets()
		}
		l.rules = append(l.rules, cr)
	}
	return l, nil
}

// Config returns the configuration.
func (l *Limiter) Config() Config { return l.cfg }

func (r *rule) newBuckets() *buckets {
	var b buckets
	if r.Events > 0 {
		burst := r.EventsBurst
		if burst == 0 {
			burst = max(1, int(math.Ceil(r.Events)))
		}
		b.events = rate.NewLimiter(rate.Limit(r.Events), burst)
	}
	if r.Bytes > 0 {
		burst := r.BytesBurst
		if burst == 0 {
			burst = max(1<<20, int(math.Ceil(r.Bytes)))
		}
		b.bytes = rate.NewLimiter(rate.Limit(r.Bytes), burst)
	}
	return &b
}

func (r *rule) matches(per, subject, topic string) bool {
	return r.Per == per && subjectMatch(r.Principal, subject) && (r.anyTopic || r.topic.Match(topic))
}

// Publish draws one event of size payload bytes on topic, published by the
// principal subject, from the buckets of the first matching rule of each
// scope. Over a limit it takes nothing and returns an *facade.Error with
// code rate_limited whose RetryAfter says when the same publish would pass
// (see [facade.RetryAfter]); an event larger than a bytes burst can never
// pass and gets facade.ErrTooLarge. It does not block.
func (l *Limiter) Publish(subject, topic string, size int) error {
	if l == nil || len(l.rules) == 0 {
		return nil
	}
	now := time.Now()
	var held [4]*rate.Reservation
	n := 0
	cancel := func() {
		for _, r := range held[:n] {
			r.CancelAt(now)
		}
	}
	for _, per := range [2]string{PerPrincipal, PerTopic} {
		ri := l.match(per, subject, topic)
		if ri < 0 {
			continue
		}
		r := &l.rules[ri]
		b := r.topicB
		if b == nil {
			b = l.principalBuckets(ri, subject)
		}
		for _, dim := range [2]struct {
			lim    *rate.Limiter
			n      int
			reason string
		}{{b.events, 1, ReasonEvents}, {b.bytes, size, ReasonBytes}} {
			if dim.lim == nil {
				continue
			}
			res := dim.lim.ReserveN(now, dim.n)
			if !res.OK() {
				cancel()
				l.throttled(r.Class, dim.reason)
				return fmt.Errorf("%w: an event of %d bytes exceeds the bytes burst %d of its rate limit", facade.ErrTooLarge, size, dim.lim.Burst())
			}
			if d := res.DelayFrom(now); d > 0 {
				res.CancelAt(now)
				cancel()
				l.throttled(r.Class, dim.reason)
				return rateLimited(max(d, minWait), per, dim.reason)
			}
			held[n] = res
			n++
		}
	}
	return nil
}

func rateLimited(d time.Duration, per, reason string) error {
	unit := "events"
	if reason == ReasonBytes {
		unit = "bytes"
	}
	return &facade.Error{Code: facade.ErrRateLimited.Code, RetryAfter: d,
		Msg: fmt.Sprintf("over the %s rate limit of this %s; retry in %d ms", unit, per, d.Milliseconds()+1)}
}

// match returns the index of the first rule of scope per matching the
// publish, or -1.
func (l *Limiter) match(per, subject, topic string) int {
	for i := range l.rules {
		if l.rules[i].matches(per, subject, topic) {
			return i
		}
	}
	return -1
}

func (l *Limiter) principalBuckets(ri int, subject string) *buckets {
	k := bucketKey{ri, subject}
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.buckets[k]; ok {
		return b
	}
	if len(l.buckets) >= l.cfg.MaxTracked {
		l.pruneLocked()
	}
	b := l.rules[ri].newBuckets()
	l.buckets[k] = b
	return b
}

// pruneLocked drops the buckets that are full again: forgetting them
// changes nothing for their principals. If that leaves more than nine
// tenths of MaxTracked, it drops others too, at random, down to that: the
// bound holds, and a principal dropped early gets a full burst again.
// Pruning to nine tenths keeps it to one scan per tenth of MaxTracked new
// principals.
func (l *Limiter) pruneLocked() {
	now := time.Now()
	full := func(r *rate.Limiter) bool { return r == nil || r.TokensAt(now) >= float64(r.Burst()) }
	for k, b := range l.buckets {
		if full(b.events) && full(b.bytes) {
			delete(l.buckets, k)
		}
	}
	keep := l.cfg.MaxTracked - max(l.cfg.MaxTracked/10, 1)
	for k := range l.buckets {
		if len(l.buckets) <= keep {
			break
		}
		delete(l.buckets, k)
	}
}

func (l *Limiter) throttled(class, reason string) {
	if f := l.cfg.OnThrottle; f != nil {
		f(class, reason)
	}
}

// quotas returns the quotas of subject, -1 meaning unlimited, and its
// class.
func (l *Limiter) quotas(subject string) (Quotas, string) {
	q := l.cfg.Quotas
	for _, p := range l.cfg.Principals {
		if !subjectMatch(p.Subject, subject) {
			continue
		}
		pick := func(o, d int) int {
			switch o {
			case 0:
				return d
			case -1:
				return 0
			}
			return o
		}
		q = Quotas{
			Topics:        pick(p.Topics, q.Topics),
			Groups:        pick(p.Groups, q.Groups),
			Subscriptions: pick(p.Subscriptions, q.Subscriptions),
			Connections:   pick(p.Connections, q.Connections),
		}
		class := p.Class
		if class == "" {
			class = p.Subject
		}
		return q, class
	}
	return q, DefaultClass
}

// hold counts one more in m[key] unless that reaches limit (0:
// unlimited); the release it returns counts it out again, once.
func (l *Limiter) hold(m map[string]int, key string, limit int) (func(), bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if limit > 0 && m[key] >= limit {
		return nil, false
	}
	m[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if m[key]--; m[key] <= 0 {
				delete(m, key)
			}
		})
	}, true
}

func nop() {}

// ConnectIP admits a connection from the client address ip (without
// port) against ConnectionsPerIP. The release it returns must be called
// when the connection ends. Refused: facade.ErrConnectionQuota.
func (l *Limiter) ConnectIP(ip string) (release func(), err error) {
	if l == nil || l.cfg.ConnectionsPerIP == 0 {
		return nop, nil
	}
	rel, ok := l.hold(l.ipConns, ip, l.cfg.ConnectionsPerIP)
	if !ok {
		l.throttled(DefaultClass, ReasonConnectionsIP)
		return nil, fmt.Errorf("%w: %d connections from this address on this hub", facade.ErrConnectionQuota, l.cfg.ConnectionsPerIP)
	}
	return rel, nil
}

// Connect admits a connection of the principal subject against its
// connection quota. The release it returns must be called when the
// connection ends (or changes principal). Refused:
// facade.ErrConnectionQuota.
func (l *Limiter) Connect(subject string) (release func(), err error) {
	if l == nil {
		return nop, nil
	}
	q, class := l.quotas(subject)
	if q.Connections == 0 {
		return nop, nil
	}
	rel, ok := l.hold(l.conns, subject, q.Connections)
	if !ok {
		l.throttled(class, ReasonConnections)
		return nil, fmt.Errorf("%w: %d connections of this principal on this hub", facade.ErrConnectionQuota, q.Connections)
	}
	return rel, nil
}

// Subscribe admits a subscription of the principal that ctx carries (see
// [WithPrincipal]; none: unlimited) against its subscription quota. The
// release it returns must be called when the subscription ends. Refused:
// facade.ErrSubscriptionQuota.
func (l *Limiter) Subscribe(ctx context.Context) (release func(), err error) {
	subject, ok := PrincipalFrom(ctx)
	if l == nil || !ok || ctx.Value(countedByCallerKey{}) != nil {
		return nop, nil
	}
	q, class := l.quotas(subject)
	if q.Subscriptions == 0 {
		return nop, nil
	}
	rel, ok := l.hold(l.subs, subject, q.Subscriptions)
	if !ok {
		l.throttled(class, ReasonSubscriptions)
		return nil, fmt.Errorf("%w: %d subscriptions of this principal on this hub", facade.ErrSubscriptionQuota, q.Subscriptions)
	}
	return rel, nil
}

type principalKey struct{}

type countedByCallerKey struct{}

// SubscriptionsCountedByCaller returns ctx whose bus subscriptions do not
// count against the principal's subscription quota, because the caller
// counts its own (the WebSocket gateway shares one bus subscription among
// the connections of a group, and counts each connection's).
func SubscriptionsCountedByCaller(ctx context.Context) context.Context {
	return context.WithValue(ctx, countedByCallerKey{}, true)
}

// WithPrincipal returns ctx carrying the principal subject whose quotas
// the bus's creations and subscriptions count against.
func WithPrincipal(ctx context.Context, subject string) context.Context {
	return context.WithValue(ctx, principalKey{}, subject)
}

// PrincipalFrom returns the principal subject ctx carries.
func PrincipalFrom(ctx context.Context) (string, bool) {
	s, ok := ctx.Value(principalKey{}).(string)
	return s, ok
}
