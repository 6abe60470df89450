package limits

import (
	"errors"
	"fmt"
	"time"

	"github.com/eventhub/eventhub/pattern"
)

// Scopes of a [RateRule].
const (
	// PerPrincipal: each principal (token subject) has its own buckets.
	PerPrincipal = "principal"
	// PerTopic: every publish to topics matching the rule's pattern, by
	// any principal, draws on the rule's one pair of buckets.
	PerTopic = "topic"
)

// DefaultMaxTracked is the default of Config.MaxTracked.
const DefaultMaxTracked = 100_000

// Config is the "limits:" section of the hub's configuration file. The
// zero value limits nothing.
type Config struct {
	// Rates are the rate limits. For each scope (per principal, per
	// topic) the first rule whose principal and topic match a publish
	// applies, so list overrides before the defaults they refine; a
	// publish must pass the rule of both scopes.
	Rates []RateRule `yaml:"rates"`
	// Quotas are the default quotas of every principal.
	Quotas Quotas `yaml:"quotas"`
	// Principals override Quotas for the principals they name; the first
	// entry whose subject matches wins. A zero field inherits the default,
	// -1 lifts it.
	Principals []PrincipalQuotas `yaml:"principals"`
	// ConnectionsPerIP is the most WebSocket connections one client
	// address may hold on one hub (0: unlimited).
	ConnectionsPerIP int `yaml:"connectionsPerIP"`
	// Account sets the JetStream limits of the NATS account the embedded
	// server runs the hub in. An external server's account limits are
	// set in that server's configuration.
	Account AccountLimits `yaml:"account"`
	// MaxTracked bounds how many principals' rate buckets are kept
	// (default 100 000); full buckets of idle principals are dropped first,
	// then others at random (their principals get a full burst again).
	MaxTracked int `yaml:"maxTracked"`
	// OnThrottle, if set, is called for every refused request with the
	// principal's class and the reason (metrics). It must be quick and
	// safe for concurrent use.
	OnThrottle func(class, reason string) `yaml:"-"`
}

// RateRule is one rate limit: token buckets of events and of bytes.
type RateRule struct {
	// Per is the scope: PerPrincipal (default) or PerTopic.
	Per string `yaml:"per"`
	// Principal is the token subject the rule applies to: exact, a
	// prefix ending in "*" ("svc-*"), or "" / "*" for every principal.
	Principal string `yaml:"principal"`
	// Topic is the topic pattern (the ACL syntax: "*" one segment, "**"
	// one or more); "" means every topic ("**").
	Topic string `yaml:"topic"`
	// Events is the sustained rate in events per second (0: unlimited);
	// EventsBurst the bucket size (default: Events rounded up, at least 1).
	Events      float64 `yaml:"events"`
	EventsBurst int     `yaml:"eventsBurst"`
	// Bytes is the sustained rate in payload bytes per second (0:
	// unlimited); BytesBurst the bucket size (default: one second's worth,
	// at least 1 MiB, so that one event of the largest size fits).
	Bytes      float64 `yaml:"bytes"`
	BytesBurst int     `yaml:"bytesBurst"`
	// Class names the principals this rule limits in metrics (default
	// "default"). Never a label per token.
	Class string `yaml:"class"`
}

// Quotas bound what one principal creates and holds. Zero is unlimited
// in the defaults.
type Quotas struct {
	// Topics is how many topics (streams) the principal may create, on
	// every hub of the NATS account together.
	Topics int `yaml:"topics"`
	// Groups is how many groups (durable consumers) the principal may
	// create, on every hub together.
	Groups int `yaml:"groups"`
	// Subscriptions is how many live and group subscriptions the
	// principal may hold at once on one hub.
	Subscriptions int `yaml:"subscriptions"`
	// Connections is how many WebSocket connections the principal may
	// hold at once on one hub.
	Connections int `yaml:"connections"`
}

// PrincipalQuotas overrides the quotas of the principals Subject matches
// (exact, or a prefix ending in "*").
type PrincipalQuotas struct {
	Subject string `yaml:"subject"`
	// Class names these principals in metrics (default: the subject
	// pattern).
	Class  string `yaml:"class"`
	Quotas `yaml:",inline"`
}

// AccountLimits are the JetStream account limits NATS itself enforces
// (0: unlimited). A request over them is refused with limit_exceeded
// (streams, consumers) or storage_full (bytes).
type AccountLimits struct {
	MaxStreams      int   `yaml:"maxStreams"`
	MaxConsumers    int   `yaml:"maxConsumers"`
	MaxStorageBytes int64 `yaml:"maxStorageBytes"`
	MaxMemoryBytes  int64 `yaml:"maxMemoryBytes"`
}

// IsZero reports whether no account limit is set.
func (a AccountLimits) IsZero() bool { return a == AccountLimits{} }

// Enabled reports whether c limits anything in the hub (account limits
// aside).
func (c Config) Enabled() bool {
	return len(c.Rates) > 0 || c.Quotas != (Quotas{}) || len(c.Principals) > 0 || c.ConnectionsPerIP > 0
}

// ErrInvalidConfig is wrapped by every error of [Config.Validate].
var ErrInvalidConfig = errors.New("limits: invalid configuration")

// Validate reports the first invalid setting.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	for i, r := range c.Rates {
		switch r.Per {
		case "", PerPrincipal, PerTopic:
		default:
			return bad("rates[%d]: per %q: want %s or %s", i, r.Per, PerPrincipal, PerTopic)
		}
		if r.Topic != "" {
			if _, err := pattern.Compile(r.Topic); err != nil {
				return bad("rates[%d]: topic: %v", i, err)
			}
		}
		if r.Events < 0 || r.Bytes < 0 || r.EventsBurst < 0 || r.BytesBurst < 0 {
			return bad("rates[%d]: negative rate or burst", i)
		}
		if r.Events == 0 && r.Bytes == 0 {
			return bad("rates[%d]: set events, bytes or both", i)
		}
	}
	if q := c.Quotas; q.Topics < 0 || q.Groups < 0 || q.Subscriptions < 0 || q.Connections < 0 {
		return bad("quotas: negative value (0 is unlimited)")
	}
	for i, p := range c.Principals {
		if p.Subject == "" {
			return bad("principals[%d]: subject is required", i)
		}
		if q := p.Quotas; q.Topics < -1 || q.Groups < -1 || q.Subscriptions < -1 || q.Connections < -1 {
			return bad("principals[%d] (%s): a quota is 0 (the default), -1 (unlimited) or positive", i, p.Subject)
		}
	}
	if c.ConnectionsPerIP < 0 || c.MaxTracked < 0 {
		return bad("negative connectionsPerIP or maxTracked")
	}
	a := c.Account
	if a.MaxStreams < 0 || a.MaxConsumers < 0 || a.MaxStorageBytes < 0 || a.MaxMemoryBytes < 0 {
		return bad("account: negative limit")
	}
	return nil
}

// subjectMatch reports whether subject matches pattern: exact, a prefix
// ending in "*", or "" / "*" for all.
func subjectMatch(pattern, subject string) bool {
	switch {
	case pattern == "" || pattern == "*":
		return true
	case pattern[len(pattern)-1] == '*':
		p := pattern[:len(pattern)-1]
		return len(subject) >= len(p) && subject[:len(p)] == p
	}
	return pattern == subject
}

// minWait is the smallest retry delay reported, so that a client never
// spins on "retry after 0 ms".
const minWait = time.Millisecond
