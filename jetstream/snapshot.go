package jetstream

import (
	"context"
	"fmt"

	"github.com/eventhub/eventhub/facade"
)

var _ facade.SnapshotSubscriber = (*Bus)(nil)

// SubscribeSnapshot implements [facade.SnapshotSubscriber] (the warm start):
//
//  1. N = the stream's last sequence; the newest event of every key as of N
//     is handed to handler ([Bus.Latest]: one multi_last direct get with
//     up_to_seq N, or its consumer fallback beyond 1024 keys);
//  2. a follower (an ordered consumer: ephemeral, ack-less, in memory)
//     filtered to the topic's keyed subjects starts at N+1 and hands every
//     later event to handler. nats.go re-creates it from the last sequence
//     seen if it stalls or the server restarts, so live events have no gap
//     and no duplicate.
//
// Unkeyed events of the topic are not delivered. The subscription ends with
// Stop, a handler error, or when the bus is closed.
func (b *Bus) SubscribeSnapshot(ctx context.Context, topic string, handler facade.SnapshotHandler) (facade.Subscription, error) {
	if handler == nil {
		return nil, fmt.Errorf("%w: nil handler", facade.ErrInvalidOption)
	}
	if b.isClosed() {
		return nil, facade.ErrClosed
	}
	ti, err := b.topic(ctx, topic)
	if err != nil {
		return nil, err
	}
	if !ti.keyed {
		return nil, fmt.Errorf("%w: stream %s does not capture keyed subjects of %s", facade.ErrBadKey, ti.name, topic)
	}
	n, err := b.snapshotSeq(ctx, ti)
	if err != nil {
		return nil, err
	}
	call := func(ctx context.Context, e *facade.EventRecord, live bool) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("handler panic: %v", r)
			}
		}()
		return handler(ctx, e, facade.SnapshotDelivery{Live: live, UpToSeq: n})
	}
	err = b.latestUpTo(ctx, ti, n, func(e *facade.EventRecord) error {
		return call(ctx, e, false)
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: %w", topic, err)
	}
	return b.follow(ctx, ti, []string{keyedWildcard(topic)}, n, func(ctx context.Context, e *facade.EventRecord) error {
		if err := call(ctx, e, true); err != nil {
			b.log.Error("snapshot subscription stopped by its handler", "topic", topic, "id", e.ID, "err", err)
			return err
		}
		return nil
	})
}
