package facade

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Start positions for a new group.
const (
	FromLatest   = "latest"
	FromEarliest = "earliest"
	FromTS       = "ts"
	FromAfterID  = "afterId"
)

// OrderByKey is the [SubscribeOptions.OrderBy] of groups ordered by key.
const OrderByKey = "key"

// Defaults of [SubscribeOptions], the same as the reference TypeScript
// clients use.
const (
	DefaultBatchSize   = 100
	DefaultMaxInFlight = 1000
	DefaultAckTimeout  = 30 * time.Second
	DefaultMaxAttempts = 5
)

// PublishOptions are the optional envelope fields of a publish. The zero value
// publishes with a fresh uuidv7 id and the current time. Its JSON form is the
// "opts" of a WebSocket PUBLISH frame.
type PublishOptions struct {
	ID        string            `json:"id,omitempty"`
	TS        int64             `json:"ts,omitempty"`
	Key       string            `json:"key,omitempty"`
	Partition *int              `json:"partition,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	Tags      []string          `json:"tags,omitempty"`
	CausedBy  []string          `json:"caused_by,omitempty"`
	SID       string            `json:"sid,omitempty"`
	// ExpectedLastSeq, when set, makes the publish a compare-and-set of
	// its key: it is stored only if the newest event of the key is still
	// at this stream position (the Seq the caller read), 0 meaning that
	// the key has no event yet. Otherwise it fails with ErrWrongLastSeq
	// and nothing is stored. It needs a Key.
	ExpectedLastSeq *uint64 `json:"expected_last_seq,omitempty"`
	// TTLSeconds, when set (at least 1), removes the event from the store
	// this many seconds after it was stored: on a compacted topic the key
	// then has no value, so presence-like state expires without a sweeper.
	// Subscribers are not told (delete the key to tell them). The topic's
	// stream must allow per-message TTLs (the first such publish turns
	// them on for the streams the hub makes).
	TTLSeconds int64 `json:"ttl_seconds,omitempty"`
}

// Validate checks the options every way in shares (the Go API, WebSocket
// opts, HTTP Eventhub-* headers): a given ts is positive epoch
// milliseconds (0 means now), and the key is valid. Errors wrap
// ErrInvalidOption or ErrBadKey.
func (o *PublishOptions) Validate() error {
	if o.TS < 0 {
		return fmt.Errorf("%w: ts must be epoch milliseconds, not %d", ErrInvalidOption, o.TS)
	}
	if o.TTLSeconds < 0 {
		return fmt.Errorf("%w: ttl_seconds must be 1 or more, not %d", ErrInvalidOption, o.TTLSeconds)
	}
	if o.ExpectedLastSeq != nil && o.Key == "" {
		return fmt.Errorf("%w: expected_last_seq needs a key", ErrInvalidOption)
	}
	return ValidateKey(o.Key)
}

// SubscribeOptions configure a subscription. The zero value subscribes from
// "latest" with the documented defaults. Its JSON form is the "opts" of a
// WebSocket SUBSCRIBE frame.
//
// From, TS and AfterID only initialise a group that does not exist yet; an
// existing group resumes at its cursor (use [Cursors.SetCursor] to move it).
type SubscribeOptions struct {
	From    string `json:"from,omitempty"`
	TS      int64  `json:"ts,omitempty"`
	AfterID string `json:"afterId,omitempty"`
	// BatchSize is how many events one pull asks for (default 100).
	BatchSize int `json:"batchSize,omitempty"`
	// MaxInFlight bounds this member's delivered but unacknowledged events,
	// its concurrent handlers and its pull size (default 1000). It is also
	// the group's window (JetStream's MaxAckPending) unless GroupMaxInFlight
	// is larger: with MaxInFlight 1 and a single member, a failing event
	// blocks the group until it is acked or dead-lettered (ordered retries).
	MaxInFlight int `json:"maxInFlight,omitempty"`
	// GroupMaxInFlight raises the group's window above MaxInFlight, for
	// groups with many members that each take MaxInFlight (the WebSocket
	// gateway's subscriptions). A group's window only ever grows.
	GroupMaxInFlight int `json:"groupMaxInFlight,omitempty"`
	// AckTimeoutMs is how long a delivery may stay unacknowledged before it is
	// redelivered (default 30 000). The group's own timeout is the largest
	// any member asked for; a ManualAck member with a shorter one hands its
	// expired deliveries back itself.
	AckTimeoutMs int64 `json:"ackTimeoutMs,omitempty"`
	// MaxAttempts is how many deliveries an event gets before it goes to the
	// dead-letter topic (default 5).
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// Retry is the group's retry policy: how long a nacked event waits
	// before it is delivered again. Nil follows the group's policy (set by
	// the member that created the group), else the bus's default (100 ms,
	// doubling per attempt, at most 10 s). A member that asks for a policy
	// other than the group's is refused with [ErrConflictingOption].
	Retry *RetryPolicy `json:"retry,omitempty"`
	// OrderBy, when [OrderByKey], makes the group deliver the events of
	// one key to one member at a time, in stream order, while events of
	// different keys run in parallel up to MaxInFlight; events without a
	// key are not ordered. A nacked or expired event holds its key's later
	// events back until it is settled or dead-lettered. Like Retry it is
	// the group's: set by the member that creates the group; empty follows
	// the group; asking for another is refused with
	// [ErrConflictingOption].
	OrderBy string `json:"orderBy,omitempty"`
	// InactiveTimeoutMs, when set, deletes a new group once it has had no
	// member for this long (at least 1000): for per-page or per-process
	// groups that must not pile up. Zero keeps the group until it is
	// deleted by an operator.
	InactiveTimeoutMs int64 `json:"inactiveTimeoutMs,omitempty"`
	// ManualAck leaves settlement to the caller, who holds the
	// [Delivery] handle, instead of the handler's return value. The
	// handler is then called one event at a time, in stream order, and
	// should return quickly: the delivery stays in flight until it is
	// acked, nacked, or its deadline passes (then it is handed back and a
	// late Ack returns ErrExpired).
	ManualAck bool `json:"manualAck,omitempty"`
	// Topics subscribes the same group and handler to several topics
	// (fan-in). When set, the topic argument of Subscribe is added to it if
	// not empty. Each entry may be a pattern, as the topic argument may
	// (see [Subscriber]).
	Topics []string `json:"topics,omitempty"`
	// Filter, when set, skips (and acknowledges) the events it returns false
	// for. It does not travel over the wire.
	Filter func(*EventRecord) bool `json:"-"`
}

// WithDefaults returns o with every unset field at its default.
func (o SubscribeOptions) WithDefaults() SubscribeOptions {
	if o.From == "" {
		o.From = FromLatest
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.AckTimeoutMs <= 0 {
		o.AckTimeoutMs = DefaultAckTimeout.Milliseconds()
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	return o
}

// AckTimeout returns AckTimeoutMs as a duration.
func (o SubscribeOptions) AckTimeout() time.Duration {
	return time.Duration(o.AckTimeoutMs) * time.Millisecond
}

// Validate reports an option that is out of range, wrapping [ErrInvalidOption].
func (o SubscribeOptions) Validate() error {
	switch o.From {
	case "", FromLatest, FromEarliest:
	case FromTS:
		if o.TS <= 0 {
			return fmt.Errorf("%w: from %q needs ts (epoch ms)", ErrInvalidOption, o.From)
		}
	case FromAfterID:
		if o.AfterID == "" {
			return fmt.Errorf("%w: from %q needs afterId", ErrInvalidOption, o.From)
		}
	default:
		return fmt.Errorf("%w: from must be latest, earliest, ts or afterId, not %q", ErrInvalidOption, o.From)
	}
	if o.BatchSize < 0 || o.BatchSize > 10_000 {
		return fmt.Errorf("%w: batchSize %d out of range 1..10000", ErrInvalidOption, o.BatchSize)
	}
	if o.MaxInFlight < 0 || o.MaxInFlight > 100_000 {
		return fmt.Errorf("%w: maxInFlight %d out of range 1..100000", ErrInvalidOption, o.MaxInFlight)
	}
	if o.GroupMaxInFlight < 0 || o.GroupMaxInFlight > 1_000_000 {
		return fmt.Errorf("%w: groupMaxInFlight %d out of range 1..1000000", ErrInvalidOption, o.GroupMaxInFlight)
	}
	if o.AckTimeoutMs != 0 && (o.AckTimeoutMs < 100 || o.AckTimeoutMs > 24*3600*1000) {
		return fmt.Errorf("%w: ackTimeoutMs %d out of range 100..86400000", ErrInvalidOption, o.AckTimeoutMs)
	}
	if o.InactiveTimeoutMs != 0 && (o.InactiveTimeoutMs < 1000 || o.InactiveTimeoutMs > 30*24*3600*1000) {
		return fmt.Errorf("%w: inactiveTimeoutMs %d out of range 1000..2592000000", ErrInvalidOption, o.InactiveTimeoutMs)
	}
	if o.MaxAttempts < 0 || o.MaxAttempts > 1000 {
		return fmt.Errorf("%w: maxAttempts %d out of range 1..1000", ErrInvalidOption, o.MaxAttempts)
	}
	if o.OrderBy != "" && o.OrderBy != OrderByKey {
		return fmt.Errorf("%w: orderBy must be %q or unset, not %q", ErrInvalidOption, OrderByKey, o.OrderBy)
	}
	if o.Retry != nil {
		if err := o.Retry.Validate(); err != nil {
			return err
		}
	}
	for _, t := range o.Topics {
		if err := ValidatePattern(t); err != nil {
			return err
		}
	}
	return nil
}

// MaxBackoffMs bounds every delay of a [RetryPolicy] (24 hours).
const MaxBackoffMs = 24 * 3600 * 1000

// RetryPolicy says how long a nacked event waits before its next delivery:
// either exponentially, MinBackoffMs after the first attempt, doubling per
// attempt, at most MaxBackoffMs; or BackoffMs, an explicit list whose n-th
// entry is the wait after attempt n (its last entry repeats). Its JSON form
// is the "retry" of a SUBSCRIBE frame's opts.
type RetryPolicy struct {
	// MinBackoffMs is the wait after the first attempt (unset: the bus's
	// default, 100, or MaxBackoffMs when that is smaller).
	MinBackoffMs int64 `json:"minBackoffMs,omitempty"`
	// MaxBackoffMs caps the doubling (unset: the bus's default, 10 000, or
	// MinBackoffMs when that is larger).
	MaxBackoffMs int64 `json:"maxBackoffMs,omitempty"`
	// BackoffMs lists the waits after attempts 1, 2, …; the last one
	// repeats. It excludes MinBackoffMs and MaxBackoffMs.
	BackoffMs []int64 `json:"backoffMs,omitempty"`
}

// Validate reports a policy that is out of range or mixes its two forms,
// wrapping [ErrInvalidOption].
func (p RetryPolicy) Validate() error {
	inRange := func(v int64) bool { return v >= 1 && v <= MaxBackoffMs }
	if len(p.BackoffMs) > 0 {
		if p.MinBackoffMs != 0 || p.MaxBackoffMs != 0 {
			return fmt.Errorf("%w: retry: backoffMs excludes minBackoffMs and maxBackoffMs", ErrInvalidOption)
		}
		if len(p.BackoffMs) > 100 {
			return fmt.Errorf("%w: retry: backoffMs has %d entries, at most 100", ErrInvalidOption, len(p.BackoffMs))
		}
		for i, v := range p.BackoffMs {
			if !inRange(v) {
				return fmt.Errorf("%w: retry: backoffMs[%d] %d out of range 1..%d", ErrInvalidOption, i, v, MaxBackoffMs)
			}
		}
		return nil
	}
	if p.BackoffMs != nil {
		return fmt.Errorf("%w: retry: backoffMs is empty", ErrInvalidOption)
	}
	if p.MinBackoffMs != 0 && !inRange(p.MinBackoffMs) {
		return fmt.Errorf("%w: retry: minBackoffMs %d out of range 1..%d", ErrInvalidOption, p.MinBackoffMs, MaxBackoffMs)
	}
	if p.MaxBackoffMs != 0 && !inRange(p.MaxBackoffMs) {
		return fmt.Errorf("%w: retry: maxBackoffMs %d out of range 1..%d", ErrInvalidOption, p.MaxBackoffMs, MaxBackoffMs)
	}
	if p.MinBackoffMs != 0 && p.MaxBackoffMs != 0 && p.MinBackoffMs > p.MaxBackoffMs {
		return fmt.Errorf("%w: retry: minBackoffMs %d above maxBackoffMs %d", ErrInvalidOption, p.MinBackoffMs, p.MaxBackoffMs)
	}
	return nil
}

// WithDefaults returns p with an unset minimum or maximum taken from lo
// and hi (the bus's defaults), kept in order: a policy that only sets
// MaxBackoffMs below lo starts at it, one that only sets MinBackoffMs
// above hi stays at it. A list is returned as it is.
func (p RetryPolicy) WithDefaults(lo, hi time.Duration) RetryPolicy {
	if len(p.BackoffMs) > 0 {
		return RetryPolicy{BackoffMs: append([]int64(nil), p.BackoffMs...)}
	}
	p.BackoffMs = nil
	switch {
	case p.MinBackoffMs == 0 && p.MaxBackoffMs == 0:
		p.MinBackoffMs, p.MaxBackoffMs = lo.Milliseconds(), hi.Milliseconds()
	case p.MinBackoffMs == 0:
		p.MinBackoffMs = min(lo.Milliseconds(), p.MaxBackoffMs)
	case p.MaxBackoffMs == 0:
		p.MaxBackoffMs = max(hi.Milliseconds(), p.MinBackoffMs)
	}
	return p
}

// Equal reports whether p and q are the same policy.
func (p RetryPolicy) Equal(q RetryPolicy) bool {
	return p.MinBackoffMs == q.MinBackoffMs && p.MaxBackoffMs == q.MaxBackoffMs && slices.Equal(p.BackoffMs, q.BackoffMs)
}

// Delay is the wait before the delivery that follows a failed attempt
// (attempt counts from 1). p must have its defaults (see
// [RetryPolicy.WithDefaults]).
func (p RetryPolicy) Delay(attempt int) time.Duration {
	attempt = max(attempt, 1)
	if n := len(p.BackoffMs); n > 0 {
		return time.Duration(p.BackoffMs[min(attempt, n)-1]) * time.Millisecond
	}
	d := p.MinBackoffMs
	for i := 1; i < attempt && d < p.MaxBackoffMs; i++ {
		d *= 2
	}
	return time.Duration(min(d, p.MaxBackoffMs)) * time.Millisecond
}

// String describes p as the docs do: "100ms doubling to 10s" or
// "1s, 5s, 30s".
func (p RetryPolicy) String() string {
	ms := func(v int64) string { return (time.Duration(v) * time.Millisecond).String() }
	if len(p.BackoffMs) > 0 {
		parts := make([]string, len(p.BackoffMs))
		for i, v := range p.BackoffMs {
			parts[i] = ms(v)
		}
		return strings.Join(parts, ", ")
	}
	return ms(p.MinBackoffMs) + " doubling to " + ms(p.MaxBackoffMs)
}
