package facade

import (
	"context"
	"fmt"
)

// Optional capabilities of keyed topics, beyond [KeyReader]. Each is found by
// type assertion on a bus; see docs/keys.md for what they mean on JetStream.

// KeyScanner is the optional capability to read the newest event of every key
// of a topic.
type KeyScanner interface {
	// Latest calls fn with the newest event of every key of topic as of one
	// position of the topic's stream, in stream order, and returns that
	// position (upToSeq; 0 when the topic is empty). It reads each key's
	// newest event once, not the topic's history.
	//
	// The result is consistent as of upToSeq: no event after it is passed to
	// fn. A key updated after upToSeq while Latest runs may be missing (on a
	// compacted topic its event as of upToSeq was replaced); its newer event
	// is after upToSeq, so reading the topic from upToSeq+1 (as
	// [SnapshotSubscriber] does) completes the picture without a gap.
	//
	// Latest blocks until every event was passed to fn. An error from fn
	// stops it and is returned. Unkeyed events are not part of the result, nor
	// are deleted keys (whose newest event is a tombstone).
	// Errors wrap ErrNotFound when the topic has no stream, ErrBadTopic or
	// ErrUnavailable.
	Latest(ctx context.Context, topic string, fn func(*EventRecord) error) (upToSeq uint64, err error)
}

// SnapshotDelivery describes one delivery of a [SnapshotSubscriber]
// subscription.
type SnapshotDelivery struct {
	// Live is false for the events of the snapshot (the newest event of each
	// key as of UpToSeq) and true for the updates that follow it.
	Live bool
	// UpToSeq is the stream position of the snapshot: snapshot events are at
	// or before it, live events after it.
	UpToSeq uint64
}

// SnapshotHandler handles one event of a [SnapshotSubscriber] subscription.
// Calls are sequential, in stream order. Returning an error stops the
// subscription (the events are not acknowledged anywhere, so there is nothing
// to redeliver).
type SnapshotHandler func(ctx context.Context, e *EventRecord, d SnapshotDelivery) error

// SnapshotSubscriber is the optional capability to subscribe with a warm
// start: the current state of a keyed topic, then its live updates.
type SnapshotSubscriber interface {
	// SubscribeSnapshot delivers the newest event of every key of topic as of
	// one stream position N (Live false), then every keyed event after N as it
	// is published (Live true), to handler. Nothing is durable: every call
	// starts from the current state, and nothing needs to be cleaned up.
	//
	// Each key's newest event as of N is delivered once, before any live
	// event; no event is delivered twice and none after N is skipped. On a
	// compacted topic, a key updated while the snapshot is read may arrive
	// only as a live event (see [KeyScanner.Latest]).
	//
	// SubscribeSnapshot blocks until the snapshot has been handled, so that
	// when it returns the caller's state is warm; live events then follow on
	// another goroutine until the subscription is stopped, the handler
	// returns an error, or the bus closes. Stop waits for a running
	// handler; Err returns the handler's error, if one ended the
	// subscription (Drain is Stop: there is nothing to settle). A handler error during the snapshot is returned by
	// SubscribeSnapshot itself. The topic's stream is created if needed.
	// Errors wrap ErrBadTopic, ErrBadKey (the topic's stream cannot hold
	// keyed events), ErrUnavailable or ErrClosed.
	SubscribeSnapshot(ctx context.Context, topic string, handler SnapshotHandler) (Subscription, error)
}

// CompactionReporter is the optional capability to tell whether a topic is
// compacted (keeps only the newest event of each key).
type CompactionReporter interface {
	// TopicCompacted reports whether topic keeps only the newest event per
	// key. It provisions the topic (as a publish would) when it does not
	// exist yet, so the answer reflects the bus's topic configuration.
	TopicCompacted(ctx context.Context, topic string) (bool, error)
}

// ErrNotCompacted: a component that needs a compacted topic (the compactor's
// snapshot topic, the process projector's state topic) was given one that
// keeps every event.
var ErrNotCompacted = &Error{Code: "not_compacted", Msg: "topic is not compacted"}

// RequireCompacted checks that topic is compacted, for components that keep
// one event per key in it. It reports false (and no error) when bus cannot
// tell (it does not implement [CompactionReporter]); a topic that is not
// compacted gives an error wrapping [ErrNotCompacted] that says how to
// configure it.
func RequireCompacted(ctx context.Context, bus any, topic string) (checked bool, err error) {
	cr, ok := bus.(CompactionReporter)
	if !ok {
		return false, nil
	}
	compacted, err := cr.TopicCompacted(ctx, topic)
	if err != nil {
		return true, fmt.Errorf("topic %s: %w", topic, err)
	}
	if !compacted {
		return true, fmt.Errorf("%w: %s keeps every event; configure it with {pattern: %s, compaction: true} (or max_msgs_per_subject 1 on its stream)",
			ErrNotCompacted, topic, topic)
	}
	return true, nil
}

// DeleteOptions are the options of [KeyDeleter.DeleteKey]. Its JSON form is
// the "opts" of a WebSocket DELETE frame.
type DeleteOptions struct {
	// Purge also removes the key's earlier events from the topic's
	// history, leaving only the tombstone.
	Purge bool `json:"purge,omitempty"`
	// ExpectedLastSeq, when set, deletes only if the newest event of the
	// key is still at this stream position, as
	// [PublishOptions.ExpectedLastSeq]; otherwise ErrWrongLastSeq.
	ExpectedLastSeq *uint64 `json:"expected_last_seq,omitempty"`
}

// KeyDeleter is the optional capability to delete keys of keyed topics.
type KeyDeleter interface {
	// DeleteKey stores a tombstone for key: an event of topic with the key,
	// Deleted set and a null payload. From it on LatestByKey and Latest
	// leave the key out and snapshots do not hold it; subscribers receive
	// the tombstone like any event, so that views drop the key. On a
	// compacted topic the tombstone replaces the key's newest event. It
	// returns the tombstone. Errors wrap ErrBadTopic, ErrBadKey (an empty
	// or invalid key, a topic whose stream has no keys), ErrNotFound (no
	// stream), ErrWrongLastSeq, ErrUnavailable or ErrClosed.
	DeleteKey(ctx context.Context, topic, key string, opts DeleteOptions) (*EventRecord, error)
}

// WatchOptions are the options of [KeyWatcher.Watch].
type WatchOptions struct {
	// KeyPrefix limits the watch to the keys that begin with it; "" watches
	// every key. It is matched against keys as they are (see ValidateKey).
	KeyPrefix string
	// UpdatesOnly skips the current values: only changes stored after
	// Watch is called are handed over.
	UpdatesOnly bool
	// After, when set, resumes a watch: instead of the current values,
	// every change stored after this stream position (the Seq of the last
	// event the watcher handled; 0: the whole history the topic keeps),
	// then the changes that follow. On a compacted topic only each key's
	// newest change is still there to be read. After and UpdatesOnly
	// exclude each other (ErrInvalidOption).
	After *uint64
}

// KeyWatcher is the optional capability to watch the keys of a keyed topic,
// as a NATS key-value watcher does.
type KeyWatcher interface {
	// Watch hands fn, for the keys of topic that begin with
	// opts.KeyPrefix: first the current value of each (its newest event as
	// of one stream position; deleted keys are left out), then nil, which
	// marks that the current values are complete, then every change as it
	// is stored: new values, and deletes as tombstones (Deleted set, a null
	// payload; an expired key's delete marker, on topics configured with
	// them, is one too). With opts.After or opts.UpdatesOnly the current
	// values are skipped and nil comes once the changes stored before
	// Watch was called have been handed over. Unkeyed events are not
	// watched.
	//
	// Calls of fn are sequential, in stream order; no event is handed over
	// twice and none is skipped after the current values' position (on a
	// compacted topic a key's intermediate values may be replaced before
	// they are read). Watch returns once nil was handed over; the changes
	// follow until the subscription is stopped or the bus closes. To resume
	// after a stop, watch again with After set to the Seq of the last event
	// fn handled. Errors wrap ErrBadTopic, ErrBadKey (a prefix that is not
	// a valid key, a topic whose stream has no keys), ErrUnavailable or
	// ErrClosed.
	Watch(ctx context.Context, topic string, opts WatchOptions, fn func(*EventRecord)) (Subscription, error)
}
