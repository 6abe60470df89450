package jetstream

// Where a topic is stored, and the positions in it: lookups for the ops
// endpoints, gateways and tests. This file only exposes what the bus
// already does internally; it adds no behaviour of its own.

import (
	"context"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TopicInfo describes the stream that holds a topic. It is a snapshot:
// safe to read from many goroutines, never updated.
type TopicInfo struct {
	// Topic is the topic name.
	Topic string
	// StreamName is the name of the stream that captures the topic.
	StreamName string
	// Stream is the stream's handle (its CachedInfo is the info at lookup).
	Stream jetstream.Stream
	// Filters are the subjects of the topic in the stream, as consumer
	// filter subjects: the topic itself and, when the stream captures them,
	// its keyed subjects (<topic>._k.*).
	Filters []string
	// Keyed: the stream captures the topic's keyed subjects.
	Keyed bool
	// Compacted: the stream keeps one message per subject
	// (max_msgs_per_subject 1).
	Compacted bool
	// Shared: the stream holds other topics too (a configured family stream
	// or an operator-made stream).
	Shared bool
}

// ConsumerName returns the name of the durable consumer of group on this
// topic.
func (ti *TopicInfo) ConsumerName(group string) string {
	return consumerNameFor(group, ti.Topic, ti.Shared)
}

// LookupTopic returns where topic is stored, without creating anything. It
// blocks for at most one or two JetStream API requests (bounded by
// Config.RequestTimeout when ctx has no deadline). Errors wrap
// [facade.ErrBadTopic], [facade.ErrNotFound] when no stream captures the
// topic, or [facade.ErrUnavailable].
func (b *Bus) LookupTopic(ctx context.Context, topic string) (*TopicInfo, error) {
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, err := b.existingTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	return &TopicInfo{
		Topic:      ti.topic,
		StreamName: ti.name,
		Stream:     ti.stream,
		Filters:    slices.Clone(ti.filters),
		Keyed:      ti.keyed,
		Compacted:  ti.compacted,
		Shared:     ti.shared,
	}, nil
}

// SeqOfID returns the stream sequence of event id in topic, found as
// afterId is (see docs/design.md): a synthesised id names its sequence; a
// uuidv7 id names its time, and only the events stored within
// Config.IDSkew of it are read (headers only). It never scans the stream
// from the start. Errors wrap [facade.ErrUnknownID] when the id is not
// there, [facade.ErrNotFound] when the topic has no stream.
func (b *Bus) SeqOfID(ctx context.Context, topic, id string) (uint64, error) {
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, err := b.groupTopic(ctx, topic, false)
	if err != nil {
		return 0, err
	}
	return b.resolveID(ctx, ti, id)
}

// SeqAtTime returns the stream sequence of topic's first event stored at or
// after t (the server's stored time, not the event's ts), or the stream's
// last sequence + 1 when there is none. One message lookup per filter
// subject of the topic. Errors wrap [facade.ErrNotFound] when the topic has
// no stream.
func (b *Bus) SeqAtTime(ctx context.Context, topic string, t time.Time) (uint64, error) {
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, err := b.groupTopic(ctx, topic, false)
	if err != nil {
		return 0, err
	}
	return b.seqAtTime(ctx, ti, t)
}

// Closed reports whether Close or Shutdown was called. A closed bus may
// still have a working connection when the connection was borrowed ([New]).
func (b *Bus) Closed() bool { return b.isClosed() }

// Config returns the bus's configuration with defaults applied. The result
// is a copy; changing it changes nothing.
func (b *Bus) Config() Config {
	c := b.cfg
	c.Topics = slices.Clone(c.Topics)
	return c
}
