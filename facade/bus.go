package facade

import (
	"context"
	"encoding/json"
)

// Publisher publishes events.
type Publisher interface {
	// Publish stores one event and returns its record once the store has
	// acknowledged it. Publishing again with the same opts.ID within the
	// store's duplicate window stores nothing new and returns the original
	// position. Errors wrap ErrBadTopic, ErrBadPayload, ErrBadKey,
	// ErrKeyRequired, ErrTooLarge, ErrUnavailable or ErrClosed.
	Publish(ctx context.Context, topic string, payload json.RawMessage, opts PublishOptions) (*EventRecord, error)
}

// PublishFuture is the pending result of [AsyncPublisher.PublishAsync].
type PublishFuture interface {
	// Wait blocks until the store acknowledged the event, the publish
	// failed, or ctx is done.
	Wait(ctx context.Context) (*EventRecord, error)
}

// AsyncPublisher is the optional capability to pipeline publishes.
type AsyncPublisher interface {
	// PublishAsync validates and sends an event without waiting for the
	// store's acknowledgement. It blocks only while the implementation's
	// window of unacknowledged publishes is full.
	PublishAsync(ctx context.Context, topic string, payload json.RawMessage, opts PublishOptions) (PublishFuture, error)
}

// Subscriber subscribes handlers to topics.
type Subscriber interface {
	// Subscribe starts delivering the events of topic (and opts.Topics) to
	// handler as a member of group, and returns the subscription's handle.
	// Subscribe returns once the group exists, so events published after it
	// returns are delivered.
	//
	// topic may be a pattern ("orders.*", "orders.**"; see
	// [ValidatePattern]) over a topic family, topics that share one stream:
	// the group is then one cursor over every matching topic, and each
	// delivery carries its event's own topic, as with fan-in. A pattern
	// whose topics live in separate streams is refused with [ErrBadTopic].
	// A pattern does not deliver the events of dead-letter topics (ending
	// in ".dlq") unless its own last segment is "dlq" ("orders.*.dlq"):
	// the group's dead letters do not come back to it.
	Subscribe(ctx context.Context, topic, group string, handler Handler, opts SubscribeOptions) (Subscription, error)
}

// Cursors reads and moves group cursors.
type Cursors interface {
	// GetCursor returns the group's cursor; ErrNotFound when the group does
	// not exist.
	GetCursor(ctx context.Context, topic, group string) (*CursorPosition, error)
	// SetCursor moves the group so that the next event delivered is the one
	// after c: by c.LastSeq if set, else by c.LastID, else by c.LastTS (the
	// first event at or after LastTS comes next), else to the beginning.
	// It rewinds or skips; the group keeps its configuration. A group that
	// does not exist yet is created at that position. Acks of deliveries
	// still in flight when the cursor moves may still count.
	SetCursor(ctx context.Context, topic, group string, c CursorPosition) error
}

// Bus is the whole event bus API.
type Bus interface {
	Publisher
	Subscriber
	Cursors
}

// KeyReader is the optional capability to read the newest event of keys.
type KeyReader interface {
	// LatestByKey returns the newest event of each key that has one; keys
	// without events, and deleted keys (whose newest event is a tombstone,
	// see [KeyDeleter]), are absent from the map.
	LatestByKey(ctx context.Context, topic string, keys []string) (map[string]*EventRecord, error)
}
