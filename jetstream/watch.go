package jetstream

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/eventhub/eventhub/facade"
)

var _ facade.KeyWatcher = (*Bus)(nil)

// Watch implements [facade.KeyWatcher] as [Bus.SubscribeSnapshot] does a
// warm start, with the keys filtered by prefix in the hub (a key is one
// subject token, which NATS wildcards cannot cut):
//
//   - current values: N = the stream's last sequence, the newest event of
//     every key as of N ([Bus.Latest]), then a follower from N+1;
//   - After: the keyed events after it, read to the stream's end with
//     no-wait fetches (as [Bus.ReadAfter]), then a follower from the last
//     one read;
//   - UpdatesOnly: a follower from N+1.
//
// The follower is an ordered consumer filtered to "<topic>._k.*"; nats.go
// re-creates it from the last sequence seen if it stalls or the server
// restarts, so changes have no gap and no duplicate.
func (b *Bus) Watch(ctx context.Context, topic string, opts facade.WatchOptions, fn func(*facade.EventRecord)) (facade.Subscription, error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: nil handler", facade.ErrInvalidOption)
	}
	if opts.After != nil && opts.UpdatesOnly {
		return nil, fmt.Errorf("%w: After and UpdatesOnly exclude each other", facade.ErrInvalidOption)
	}
	if err := facade.ValidateKey(opts.KeyPrefix); err != nil {
		return nil, fmt.Errorf("key prefix: %w", err)
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
	keyed := []string{keyedWildcard(topic)}
	watched := func(e *facade.EventRecord) error {
		if e.Key != "" && strings.HasPrefix(e.Key, opts.KeyPrefix) {
			fn(e)
		}
		return nil
	}
	var after uint64
	if opts.After != nil {
		after = *opts.After
		rctx, cancel := b.withTimeout(ctx)
		_, err = b.readAfter(rctx, ti, keyed, after, math.MaxInt32, func(e *facade.EventRecord) error {
			after = e.Seq
			return watched(e)
		})
		cancel()
	} else if after, err = b.snapshotSeq(ctx, ti); err == nil && !opts.UpdatesOnly {
		err = b.latestUpTo(ctx, ti, after, watched)
	}
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", topic, err)
	}
	fn(nil)
	return b.follow(ctx, ti, keyed, after, func(_ context.Context, e *facade.EventRecord) error {
		return watched(e)
	})
}
