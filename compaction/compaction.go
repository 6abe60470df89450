package compaction

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/hashid"
)

// SnapshotSuffix is appended to the source topic to name the default
// snapshot topic: "process.state" → "process.state.snapshot".
const SnapshotSuffix = "snapshot"

// MaxAttempts is how many times the compactor tries to republish one event
// before the bus dead-letters it (facade.MaxAttempts' upper bound): a
// snapshot that skips an update is wrong until the key's next update, so the
// compactor retries for hours (with the bus's retry backoff) first.
const MaxAttempts = 1000

// Config configures a [Compactor]. Only Source is required.
type Config struct {
	// Source is the topic whose keyed events are compacted.
	Source string `yaml:"source"`
	// Snapshot is the compacted topic the newest event of each key is kept
	// in (default Source + ".snapshot"). The bus must be configured to
	// compact it ({pattern: <Snapshot>, compaction: true}); Start checks.
	Snapshot string `yaml:"snapshot"`
	// Group is the durable group the compactor reads Source with (default
	// "compactor." + Snapshot). It must be the compactor's own: another
	// member with more than one event in flight would break per-key order.
	Group string `yaml:"group"`
	// Logger receives the compactor's logs; nil discards them.
	Logger *slog.Logger `yaml:"-"`
}

// ErrInvalidConfig is wrapped by the errors of [Config.Validate].
var ErrInvalidConfig = errors.New("compaction: invalid config")

// Validate reports the first invalid setting, wrapping [ErrInvalidConfig].
func (c Config) Validate() error {
	if c.Source == "" {
		return fmt.Errorf("%w: source topic is required", ErrInvalidConfig)
	}
	c = c.withDefaults()
	if err := facade.ValidateTopic(c.Source); err != nil {
		return fmt.Errorf("%w: source: %w", ErrInvalidConfig, err)
	}
	if err := facade.ValidateTopic(c.Snapshot); err != nil {
		return fmt.Errorf("%w: snapshot: %w", ErrInvalidConfig, err)
	}
	if c.Snapshot == c.Source {
		return fmt.Errorf("%w: snapshot topic %q is the source topic", ErrInvalidConfig, c.Snapshot)
	}
	if err := facade.ValidateGroup(c.Group); err != nil {
		return fmt.Errorf("%w: group: %w", ErrInvalidConfig, err)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Snapshot == "" && c.Source != "" {
		c.Snapshot = c.Source + "." + SnapshotSuffix
	}
	if c.Group == "" {
		c.Group = "compactor." + c.Snapshot
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Bus is what the compactor needs of an event bus.
type Bus interface {
	facade.Publisher
	facade.Subscriber
}

// Compactor keeps a compacted snapshot topic up to date with a source topic.
// It is safe for concurrent use.
type Compactor struct {
	cfg Config
	log *slog.Logger
	sub facade.Subscription

	republished atomic.Uint64
	skipped     atomic.Uint64
	lastSeq     atomic.Uint64

	closeOnce sync.Once
	closeErr  error
}

// Stats counts what a compactor did since it started.
type Stats struct {
	// Republished counts keyed events copied to the snapshot topic
	// (including copies the snapshot stream recognised as duplicates),
	// tombstones of deleted keys included.
	Republished uint64
	// Skipped counts unkeyed events of the source, which have no place in a
	// snapshot by key.
	Skipped uint64
	// LastSourceSeq is the source position of the last event handled.
	LastSourceSeq uint64
}

// Start checks that cfg.Snapshot is compacted (when bus can tell, through
// [facade.CompactionReporter]; otherwise it logs a warning), then subscribes
// to cfg.Source as the durable group cfg.Group, one event in flight at a
// time, from the group's cursor (from the earliest event for a new group).
// It returns once the group exists. Each keyed event is republished to the
// snapshot topic with the same key, payload, timestamp and envelope and the
// id [SnapshotID] derives from the source id, and acknowledged only after the
// snapshot stored it.
//
// Errors wrap [ErrInvalidConfig], facade.ErrNotCompacted, or the bus's
// errors.
func Start(ctx context.Context, bus Bus, cfg Config) (*Compactor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Compactor{cfg: cfg, log: cfg.Logger.With("component", "compactor", "source", cfg.Source, "snapshot", cfg.Snapshot)}
	checked, err := facade.RequireCompacted(ctx, bus, cfg.Snapshot)
	if err != nil {
		return nil, fmt.Errorf("compaction: snapshot %w", err)
	}
	if !checked {
		c.log.Warn("cannot check that the snapshot topic is compacted with this bus")
	}
	sub, err := bus.Subscribe(ctx, cfg.Source, cfg.Group, func(ctx context.Context, d facade.Delivery) error {
		return c.handle(ctx, bus, d.Event())
	}, facade.SubscribeOptions{
		From:        facade.FromEarliest,
		MaxInFlight: 1,
		MaxAttempts: MaxAttempts,
	})
	if err != nil {
		return nil, fmt.Errorf("compaction: subscribe to %s: %w", cfg.Source, err)
	}
	c.sub = sub
	c.log.Info("compactor started", "group", cfg.Group)
	return c, nil
}

func (c *Compactor) handle(ctx context.Context, bus Bus, e *facade.EventRecord) error {
	if e.Key == "" {
		c.skipped.Add(1)
		c.lastSeq.Store(e.Seq)
		return nil
	}
	if e.Deleted {
		return c.deleted(ctx, bus, e)
	}
	_, err := bus.Publish(ctx, c.cfg.Snapshot, e.Payload, facade.PublishOptions{
		ID:        SnapshotID(c.cfg.Snapshot, e.ID, e.TS),
		TS:        e.TS,
		Key:       e.Key,
		Partition: e.Partition,
		Headers:   e.Headers,
		Tags:      e.Tags,
		CausedBy:  e.CausedBy,
		SID:       e.SID,
	})
	if err != nil {
		c.log.Warn("republish failed; will retry", "id", e.ID, "key", e.Key, "err", err)
		return fmt.Errorf("republish %s to %s: %w", e.ID, c.cfg.Snapshot, err)
	}
	c.republished.Add(1)
	c.lastSeq.Store(e.Seq)
	return nil
}

// Stats returns the compactor's counters. It does not block.
func (c *Compactor) Stats() Stats {
	return Stats{Republished: c.republished.Load(), Skipped: c.skipped.Load(), LastSourceSeq: c.lastSeq.Load()}
}

// deleted deletes the key of the source's tombstone e from the snapshot
// (a tombstone there too), so that the snapshot holds no deleted key. A
// bus that cannot delete keys ([facade.KeyDeleter]) keeps the snapshot's
// last value of the key; the tombstone is counted as skipped.
func (c *Compactor) deleted(ctx context.Context, bus Bus, e *facade.EventRecord) error {
	kd, ok := bus.(facade.KeyDeleter)
	if !ok {
		c.log.Warn("the bus cannot delete keys: the snapshot keeps the deleted key", "id", e.ID, "key", e.Key)
		c.skipped.Add(1)
		c.lastSeq.Store(e.Seq)
		return nil
	}
	if _, err := kd.DeleteKey(ctx, c.cfg.Snapshot, e.Key, facade.DeleteOptions{}); err != nil {
		c.log.Warn("delete in the snapshot failed; will retry", "id", e.ID, "key", e.Key, "err", err)
		return fmt.Errorf("delete key %q of %s: %w", e.Key, c.cfg.Snapshot, err)
	}
	c.republished.Add(1)
	c.lastSeq.Store(e.Seq)
	return nil
}

// Shutdown stops the compactor: it waits for the event being republished,
// and hands an unacknowledged one back to the group, where the next start
// finds it. It returns ctx.Err() if that takes longer than ctx allows. It is
// idempotent: later calls return the first call's result.
func (c *Compactor) Shutdown(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.closeErr = c.sub.Stop(ctx)
		c.log.Info("compactor stopped", "republished", c.republished.Load())
	})
	return c.closeErr
}

// Close is Shutdown with a 30 s limit.
func (c *Compactor) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.Shutdown(ctx)
}

// SnapshotID derives the id of the snapshot copy of source event sourceID in
// snapshot topic snapshot. It is deterministic, so republishing the same
// event again (a redelivery after a crash) carries the same Nats-Msg-Id and is
// dropped by the snapshot stream's duplicate window. It is a uuidv7 whose
// timestamp is the source id's (or ts, epoch ms, when the source id is not a
// uuidv7), so afterId positions work on the snapshot topic too, and whose
// random bits are a SHA-256 of the snapshot topic and the source id.
func SnapshotID(snapshot, sourceID string, ts int64) string {
	ms := ts
	if t, ok := facade.IDTime(sourceID); ok {
		ms = t.UnixMilli()
	}
	return hashid.V7(ms, "eventhub-snapshot", snapshot, sourceID)
}
