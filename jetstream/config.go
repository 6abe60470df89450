package jetstream

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/pattern"
)

// Config configures a [Bus]. The zero value is valid: defaults are applied by
// [Config.withDefaults].
type Config struct {
	// Topics configures the streams of topics, first matching entry wins.
	// Topics without an entry get a stream with the defaults of [TopicConfig].
	Topics []TopicConfig `yaml:"topics"`
	// Storage is the default storage of created streams: "file" (default) or
	// "memory".
	Storage string `yaml:"storage"`
	// Replicas is the default replica count of created streams (1, 3 or
	// 5). Unset, it is 3 when the server is part of a cluster of three or
	// more nodes, else 1.
	Replicas int `yaml:"replicas"`
	// PublishAsyncMaxPending is the window of unacknowledged async
	// publishes (default 4000).
	PublishAsyncMaxPending int `yaml:"publishAsyncMaxPending"`
	// RequestTimeout applies to JetStream API calls and sync publishes whose
	// context has no deadline (default 5s).
	RequestTimeout time.Duration `yaml:"requestTimeout"`
	// PullExpiry and PullHeartbeat bound how long a stalled pull goes
	// unnoticed (defaults 5s and 1s): a pull without a heartbeat for twice
	// PullHeartbeat is re-issued.
	PullExpiry    time.Duration `yaml:"pullExpiry"`
	PullHeartbeat time.Duration `yaml:"pullHeartbeat"`
	// RetryBackoff is the delay before the first redelivery of a nacked
	// event; it doubles per attempt up to MaxRetryBackoff (defaults 100ms, 10s;
	// each 1ms..24h). They are the retry policy of groups whose creator set
	// none (facade.SubscribeOptions.Retry).
	RetryBackoff    time.Duration `yaml:"retryBackoff"`
	MaxRetryBackoff time.Duration `yaml:"maxRetryBackoff"`
	// ElectionWait bounds how long a publish keeps retrying while its
	// stream has no leader (a NATS node failed and the stream's replicas
	// are electing a new one, typically within a few seconds): the caller
	// sees latency, not an error (default 15s; a ctx deadline caps it).
	// Publishes to replicated streams carry the event's Nats-Msg-Id from
	// their first attempt, so retries store it once.
	ElectionWait time.Duration `yaml:"electionWait"`
	// DisconnectedWait bounds how long a publish waits for a lost NATS
	// connection to come back before it fails with ErrUnavailable (default
	// 2s). Without it a publish made while the server is unreachable hangs
	// for the whole RequestTimeout.
	DisconnectedWait time.Duration `yaml:"disconnectedWait"`
	// IDSkew is how far around an event id's timestamp afterId resolution
	// looks for the event (default 5s): ids made on clients with skewed clocks
	// are still found.
	IDSkew time.Duration `yaml:"idSkew"`
	// Logger receives the bus's logs; nil discards them.
	Logger *slog.Logger `yaml:"-"`
	// Observer receives the bus's events for metrics; nil observes nothing.
	Observer Observer `yaml:"-"`
	// Guard, if set, is asked before the bus creates a topic's stream or a
	// group's consumer, and when a subscription starts (quotas); nil
	// allows everything.
	Guard Guard `yaml:"-"`
	// TracerProvider, if set, traces publishes and deliveries (see
	// docs/tracing.md); nil traces nothing and costs nothing.
	TracerProvider trace.TracerProvider `yaml:"-"`
}

// Guard admits the creations and subscriptions a caller asks the bus for;
// the caller travels in the context (package limits). Its errors are
// returned to the caller as they are. Implementations must be safe for
// concurrent use.
type Guard interface {
	// CreateTopic is asked before the stream of topic is created; undo is
	// called when the bus did not create it after all (the creation
	// failed, or another member created it first), to give the count back.
	CreateTopic(ctx context.Context, topic string) (undo func(), err error)
	// CreateGroup is asked before the durable consumer of group is
	// created; undo as for CreateTopic.
	CreateGroup(ctx context.Context, topic, group string) (undo func(), err error)
	// Subscribe is asked when a subscription starts; release is called
	// once when it ends.
	Subscribe(ctx context.Context) (release func(), err error)
}

// TopicConfig configures the stream of the topics matching Pattern.
type TopicConfig struct {
	// Pattern is a topic or a topic pattern, in the syntax of ACL rules:
	// "*" is one segment, "**" one or more ("heartbeat.*", "audit.**").
	// "**" may only end a pattern (NATS subjects have no equivalent
	// elsewhere). The NATS form ("audit.>") is accepted too.
	Pattern string `yaml:"pattern"`
	// Stream, when set, makes every matching topic share one stream of this
	// name (a topic family), capturing Pattern, which should then end in
	// "**" so that keyed subjects are captured too. Groups may then
	// subscribe to patterns over the family ("audit.*", "audit.**"). Empty:
	// one stream per topic.
	Stream string `yaml:"stream"`
	// MaxAge is the retention (0: unlimited); RetentionDays is the same in
	// days.
	MaxAge        time.Duration `yaml:"maxAge"`
	RetentionDays float64       `yaml:"retentionDays"`
	// MaxBytes limits the stream's size (0: unlimited); the oldest events go.
	MaxBytes int64 `yaml:"maxBytes"`
	// Storage: "file" or "memory" (default: Config.Storage).
	Storage string `yaml:"storage"`
	// Replicas: 1, 3 or 5 (default: Config.Replicas).
	Replicas int `yaml:"replicas"`
	// DuplicateWindow is how long a publish id is remembered (default 2m).
	DuplicateWindow time.Duration `yaml:"duplicateWindow"`
	// Compaction keeps only the newest event per key; publishing without a
	// key is refused with ErrKeyRequired.
	Compaction bool `yaml:"compaction"`
	// DeleteMarkerTTL, when set (1s or more), makes an expiring key a
	// delete: when a key's newest event expires (its TTL or MaxAge),
	// JetStream stores a delete marker on the key's subject in its place,
	// which readers and subscribers see as the key's tombstone, and which is
	// itself removed after DeleteMarkerTTL. It allows roll-ups on the
	// stream (see docs/keys.md).
	DeleteMarkerTTL time.Duration `yaml:"deleteMarkerTTL"`
}

// Validate reports the first invalid setting.
func (c Config) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"retryBackoff", c.RetryBackoff}, {"maxRetryBackoff", c.MaxRetryBackoff}} {
		if d.v != 0 && (d.v < time.Millisecond || d.v > facade.MaxBackoffMs*time.Millisecond) {
			return fmt.Errorf("%s %v out of range 1ms..24h", d.name, d.v)
		}
	}
	if c.RetryBackoff > 0 && c.MaxRetryBackoff > 0 && c.RetryBackoff > c.MaxRetryBackoff {
		return fmt.Errorf("retryBackoff %v above maxRetryBackoff %v", c.RetryBackoff, c.MaxRetryBackoff)
	}
	if err := validPull(c.PullExpiry, c.PullHeartbeat); err != nil {
		return err
	}
	if err := validStorage(c.Storage); err != nil {
		return err
	}
	if err := validReplicas(c.Replicas); err != nil {
		return err
	}
	for i, t := range c.Topics {
		if t.Pattern == "" {
			return fmt.Errorf("topics[%d]: pattern is required", i)
		}
		if _, err := natsPattern(t.Pattern); err != nil {
			return fmt.Errorf("topics[%d]: %w", i, err)
		}
		if err := validStorage(t.Storage); err != nil {
			return fmt.Errorf("topics[%d] (%s): %w", i, t.Pattern, err)
		}
		if err := validReplicas(t.Replicas); err != nil {
			return fmt.Errorf("topics[%d] (%s): %w", i, t.Pattern, err)
		}
		if t.Stream != "" && !validName(t.Stream) {
			return fmt.Errorf("topics[%d] (%s): stream name %q: letters, digits, '_' and '-' only", i, t.Pattern, t.Stream)
		}
		if t.MaxAge < 0 || t.RetentionDays < 0 || t.MaxBytes < 0 || t.DuplicateWindow < 0 {
			return fmt.Errorf("topics[%d] (%s): negative limit", i, t.Pattern)
		}
		if t.DeleteMarkerTTL != 0 && t.DeleteMarkerTTL < time.Second {
			return fmt.Errorf("topics[%d] (%s): deleteMarkerTTL %v: want 1s or more (or 0: no markers)", i, t.Pattern, t.DeleteMarkerTTL)
		}
	}
	return nil
}

func validStorage(s string) error {
	switch s {
	case "", "file", "memory":
		return nil
	}
	return fmt.Errorf("storage %q: want file or memory", s)
}

func validReplicas(n int) error {
	switch n {
	case 0, 1, 3, 5:
		return nil
	}
	return fmt.Errorf("replicas %d: want 1, 3 or 5 (even counts lose quorum without gaining safety)", n)
}

// WithDefaults returns c with every unset setting at its default, as the
// [Bus] applies them (Replicas stays 0: it is chosen from the cluster's size).
func (c Config) WithDefaults() Config { return c.withDefaults() }

func (c Config) withDefaults() Config {
	if c.Storage == "" {
		c.Storage = "file"
	}
	if c.PublishAsyncMaxPending <= 0 {
		c.PublishAsyncMaxPending = 4000
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.PullExpiry <= 0 {
		c.PullExpiry = 5 * time.Second
	}
	if c.PullHeartbeat <= 0 {
		c.PullHeartbeat = time.Second
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	if c.MaxRetryBackoff <= 0 {
		c.MaxRetryBackoff = max(10*time.Second, c.RetryBackoff)
	}
	if c.IDSkew <= 0 {
		c.IDSkew = 5 * time.Second
	}
	if c.ElectionWait <= 0 {
		c.ElectionWait = 15 * time.Second
	}
	if c.DisconnectedWait <= 0 {
		c.DisconnectedWait = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	return c
}

// natsTopics returns topics with their patterns in NATS syntax (the
// configuration is valid).
func natsTopics(topics []TopicConfig) []TopicConfig {
	out := slices.Clone(topics)
	for i := range out {
		out[i].Pattern, _ = natsPattern(out[i].Pattern)
	}
	return out
}

// natsPattern translates a topic pattern to a NATS subject filter
// ([pattern.Pattern.NATSSubject]); a trailing ">", NATS's own syntax, is
// taken as "**".
func natsPattern(p string) (string, error) {
	if p == ">" || strings.HasSuffix(p, ".>") {
		p = strings.TrimSuffix(p, ">") + "**"
	}
	pat, err := pattern.Compile(p)
	if err != nil {
		return "", err
	}
	subj, ok := pat.NATSSubject()
	if !ok {
		hint := `use "*" for exactly one segment`
		if prefix, _, _ := strings.Cut(p, ".**."); !strings.HasPrefix(p, "**.") {
			hint += fmt.Sprintf(", or declare the family by its prefix (%q)", prefix+".**")
		}
		return "", fmt.Errorf(`pattern %q: "**" may only be the last segment (NATS subjects cannot express it elsewhere); %s`, p, hint)
	}
	return subj, nil
}

// topicConfig returns the configuration that applies to topic.
func (c Config) topicConfig(topic string) TopicConfig {
	for _, t := range c.Topics {
		if server.SubjectMatchesFilter(topic, t.Pattern) {
			return t
		}
	}
	return TopicConfig{Pattern: topic}
}

// streamConfig builds the stream configuration for topic.
func (c Config) streamConfig(topic string, tc TopicConfig) jetstream.StreamConfig {
	sc := jetstream.StreamConfig{
		Name:        streamNameFor(topic),
		Subjects:    []string{topic, keyedWildcard(topic)},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		AllowDirect: true,
		// Per-message TTLs (PublishOptions.TTLSeconds) are turned on by
		// the first publish that asks for one (see Bus.allowTTL), or by
		// delete markers (below): a stream that allows them costs the
		// server on every publish.
		Description: "eventhub topic " + topic,
	}
	if tc.Stream != "" {
		sc.Name = tc.Stream
		sc.Subjects = []string{tc.Pattern}
		sc.Description = "eventhub topics " + tc.Pattern
	}
	sc.MaxAge = tc.MaxAge
	if tc.RetentionDays > 0 {
		sc.MaxAge = time.Duration(tc.RetentionDays * float64(24*time.Hour))
	}
	sc.MaxBytes = -1
	if tc.MaxBytes > 0 {
		sc.MaxBytes = tc.MaxBytes
	}
	sc.MaxMsgs = -1
	sc.MaxMsgsPerSubject = -1
	if tc.Compaction {
		sc.MaxMsgsPerSubject = 1
	}
	storage := tc.Storage
	if storage == "" {
		storage = c.Storage
	}
	sc.Storage = jetstream.FileStorage
	if storage == "memory" {
		sc.Storage = jetstream.MemoryStorage
	}
	sc.Replicas = tc.Replicas
	if sc.Replicas == 0 {
		sc.Replicas = c.Replicas
	}
	sc.Duplicates = tc.DuplicateWindow
	if sc.Duplicates == 0 {
		sc.Duplicates = 2 * time.Minute
	}
	if sc.MaxAge > 0 && sc.Duplicates > sc.MaxAge {
		sc.Duplicates = sc.MaxAge
	}
	if tc.DeleteMarkerTTL > 0 {
		// The marker is a message with a TTL that rolls the key's subject
		// up (JetStream requires both).
		sc.SubjectDeleteMarkerTTL, sc.AllowMsgTTL, sc.AllowRollup = tc.DeleteMarkerTTL, true, true
	}
	return sc
}

// validPull checks pullExpiry and pullHeartbeat against what a pull
// accepts (at least 1s; 500ms to 30s, at most half the expiry), so that a
// bad pair is refused when the hub starts, not when a group subscribes.
func validPull(expiry, heartbeat time.Duration) error {
	if expiry == 0 && heartbeat == 0 {
		return nil
	}
	if expiry != 0 && expiry < time.Second {
		return fmt.Errorf("pullExpiry %v: want 1s or more", expiry)
	}
	if heartbeat != 0 && (heartbeat < 500*time.Millisecond || heartbeat > 30*time.Second) {
		return fmt.Errorf("pullHeartbeat %v out of range 500ms..30s", heartbeat)
	}
	d := Config{PullExpiry: expiry, PullHeartbeat: heartbeat}.WithDefaults()
	if d.PullHeartbeat > d.PullExpiry/2 {
		return fmt.Errorf("pullHeartbeat %v above half of pullExpiry %v", d.PullHeartbeat, d.PullExpiry)
	}
	return nil
}
