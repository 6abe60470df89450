package idempotent

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/jetstream"
)

// DefaultBucket is the default KV bucket of [KV] marks.
const DefaultBucket = "eventhub_processed"

// DefaultTTL is how long a [KV] mark lives by default.
const DefaultTTL = 24 * time.Hour

// KVConfig configures a [KV] store.
type KVConfig struct {
	// Bucket is the JetStream KV bucket (default [DefaultBucket]); it is
	// created if missing. Groups share it: keys are <group>.<event id>.
	Bucket string
	// TTL is how long a mark lives (default [DefaultTTL]). It must be at
	// least the duplicate window of each topic in Topics.
	TTL time.Duration
	// Topics, when set, are the topics the wrapped handlers consume: NewKV
	// refuses a TTL shorter than any of their streams' duplicate windows.
	Topics []string
	// Replicas of the bucket (default 1; 3 on a cluster).
	Replicas int
	// Memory keeps the bucket in memory (lost with the server) instead of
	// on disk.
	Memory bool
}

// Validate reports the first invalid setting, wrapping [ErrInvalidConfig].
func (c KVConfig) Validate() error {
	if c.TTL < 0 || c.Replicas < 0 {
		return fmt.Errorf("%w: negative TTL or replicas", ErrInvalidConfig)
	}
	if c.Bucket != "" && !validKVToken(c.Bucket) {
		return fmt.Errorf("%w: bucket %q: want letters, digits, '-' and '_'", ErrInvalidConfig, c.Bucket)
	}
	return nil
}

// KV keeps the marks of processed events in a JetStream KV bucket on the
// bus's server. It is safe for concurrent use. See the package
// documentation for what it does and does not guarantee.
type KV struct {
	kv   njs.KeyValue
	cfg  KVConfig
	hook hook
}

// NewKV creates (or updates) the bucket on bus's JetStream and returns the
// store. It blocks for a few JetStream API requests. Errors wrap
// [ErrInvalidConfig] (also for a TTL below a topic's duplicate window) or
// the server's error.
func NewKV(ctx context.Context, bus *jetstream.Bus, cfg KVConfig) (*KV, error) {
	if bus == nil {
		return nil, fmt.Errorf("%w: nil bus", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	for _, topic := range cfg.Topics {
		ti, err := bus.LookupTopic(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("idempotent: topic %s: %w", topic, err)
		}
		info, err := ti.Stream.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("idempotent: topic %s: %w", topic, err)
		}
		if w := info.Config.Duplicates; cfg.TTL < w {
			return nil, fmt.Errorf("%w: TTL %v is shorter than the duplicate window %v of %s", ErrInvalidConfig, cfg.TTL, w, topic)
		}
	}
	storage := njs.FileStorage
	if cfg.Memory {
		storage = njs.MemoryStorage
	}
	kv, err := bus.JetStream().CreateOrUpdateKeyValue(ctx, njs.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "eventhub: ids of processed events, per group",
		TTL:         cfg.TTL,
		History:     1,
		Replicas:    max(cfg.Replicas, 1),
		Storage:     storage,
	})
	if err != nil {
		return nil, fmt.Errorf("idempotent: bucket %s: %w", cfg.Bucket, err)
	}
	return &KV{kv: kv, cfg: cfg}, nil
}

// Wrap returns a handler for a group subscription that skips events whose
// id group already processed:
//
//  1. get the mark <group>.<id>; if it exists, acknowledge, done;
//  2. h(ctx, d) — h must not settle d; an error nacks it;
//  3. put the mark, then acknowledge.
//
// A crash between 2 and 3 leaves no mark: the redelivery runs h again.
func (k *KV) Wrap(h func(ctx context.Context, e *facade.EventRecord) error) facade.Handler {
	return func(ctx context.Context, d facade.Delivery) error {
		e := d.Event()
		key := markKey(d.Group(), e.ID)
		if _, err := k.kv.Get(ctx, key); err == nil {
			return d.Ack(ctx)
		} else if !errors.Is(err, njs.ErrKeyNotFound) {
			return fmt.Errorf("idempotent: check %s: %w", e.ID, err)
		}
		if err := h(ctx, e); err != nil {
			return err
		}
		if err := k.at("handled", e); err != nil {
			return err
		}
		if _, err := k.kv.Put(ctx, key, strconv.AppendInt(nil, time.Now().UnixMilli(), 10)); err != nil {
			return fmt.Errorf("idempotent: mark %s: %w", e.ID, err)
		}
		if err := k.at("marked", e); err != nil {
			return err
		}
		return d.Ack(ctx)
	}
}

func (k *KV) at(stage string, e *facade.EventRecord) error {
	if k.hook == nil {
		return nil
	}
	if err := k.hook(stage, e); err != nil {
		return errAbandoned{err}
	}
	return nil
}

// Processed reports whether group processed event id (its mark exists).
// It blocks.
func (k *KV) Processed(ctx context.Context, group, id string) (bool, error) {
	_, err := k.kv.Get(ctx, markKey(group, id))
	if errors.Is(err, njs.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("idempotent: processed %s: %w", id, err)
	}
	return true, nil
}

// markKey is the KV key of a mark: the group and the id as KV tokens.
func markKey(group, id string) string { return kvToken(group) + "." + kvToken(id) }

// kvToken keeps s when it is made of KV-safe bytes (letters, digits, '-',
// '_'), else encodes it as '=' followed by its unpadded base64url, which
// no kept token starts with.
func kvToken(s string) string {
	if s != "" && validKVToken(s) {
		return s
	}
	return "=" + base64.RawURLEncoding.EncodeToString([]byte(s))
}

func validKVToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
