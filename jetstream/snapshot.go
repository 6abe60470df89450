package jetstream

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

var _ facade.SnapshotSubscriber = (*Bus)(nil)

// SubscribeSnapshot implements [facade.SnapshotSubscriber] (the warm start):
//
//  1. N = the stream's last sequence; the newest event of every key as of N
//     is handed to handler ([Bus.Latest]: one multi_last direct get with
//     up_to_seq N, or its consumer fallback beyond 1024 keys);
//  2. an ordered consumer (ephemeral, ack-less, in memory) filtered to the
//     topic's keyed subjects starts at N+1 and hands every later event to
//     handler. nats.go re-creates it from the last sequence seen if it
//     stalls or the server restarts, so live events have no gap and no
//     duplicate.
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
	s := &snapshotSub{b: b, ti: ti, handler: handler, done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	n, err := b.snapshotSeq(ctx, ti)
	if err != nil {
		s.cancel()
		return nil, err
	}
	s.upTo = n
	err = b.latestUpTo(ctx, ti, n, func(e *facade.EventRecord) error {
		return s.call(e, false)
	})
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("snapshot of %s: %w", topic, err)
	}

	rctx, cancel := b.withTimeout(ctx)
	oc, err := ti.stream.OrderedConsumer(rctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{keyedWildcard(topic)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    n + 1,
	})
	cancel()
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("live updates of %s: %w", topic, translate(err))
	}

	b.subsMu.Lock()
	if b.closed {
		b.subsMu.Unlock()
		s.cancel()
		return nil, facade.ErrClosed
	}
	b.wg.Add(1)
	b.subsMu.Unlock()

	cc, err := oc.Consume(s.onMsg,
		jetstream.PullExpiry(b.cfg.PullExpiry),
		jetstream.PullHeartbeat(b.cfg.PullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			b.log.Debug("snapshot subscription", "topic", topic, "err", err)
		}),
	)
	if err != nil {
		b.wg.Done()
		s.cancel()
		return nil, fmt.Errorf("live updates of %s: %w", topic, translate(err))
	}
	go func() {
		defer b.wg.Done()
		s.run(cc)
	}()
	return s, nil
}

// snapshotSub is one warm-start subscription.
type snapshotSub struct {
	b       *Bus
	ti      *topicInfo
	handler facade.SnapshotHandler
	upTo    uint64

	ctx    context.Context // cancelled when the subscription stops
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	mu   sync.Mutex
	last uint64 // last stream sequence handed to the handler
	err  error  // why it ended on its own: a handler error, or the bus closed
}

var _ facade.Subscription = (*snapshotSub)(nil)

// call runs the handler, turning a panic into an error.
func (s *snapshotSub) call(e *facade.EventRecord, live bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	return s.handler(s.ctx, e, facade.SnapshotDelivery{Live: live, UpToSeq: s.upTo})
}

// onMsg runs on the ordered consumer's goroutine, one message at a time.
func (s *snapshotSub) onMsg(msg jetstream.Msg) {
	if s.ctx.Err() != nil {
		return
	}
	meta, err := msg.Metadata()
	if err != nil {
		return
	}
	seq := meta.Sequence.Stream
	s.mu.Lock()
	stale := seq <= s.last || seq <= s.upTo
	s.mu.Unlock()
	if stale {
		return // never twice, never what the snapshot covered
	}
	e := fromMsg(msg.Subject(), msg.Headers(), msg.Data(), seq, meta.Timestamp)
	if err := s.call(e, true); err != nil {
		s.endedBy(err)
		s.b.log.Error("snapshot subscription stopped by its handler", "topic", s.ti.topic, "id", e.ID, "err", err)
		s.cancel()
		return
	}
	s.mu.Lock()
	s.last = seq
	s.mu.Unlock()
}

// run waits for the end of the subscription, then stops the consumer and
// waits for a running handler.
func (s *snapshotSub) run(cc jetstream.ConsumeContext) {
	defer close(s.done)
	closed := cc.Closed()
	select {
	case <-s.ctx.Done():
	case <-closed: // the connection closed
		s.endedBy(fmt.Errorf("%w: the connection closed", facade.ErrClosed))
	case <-s.b.done:
		s.endedBy(fmt.Errorf("%w: the bus closed", facade.ErrClosed))
	}
	s.cancel()
	cc.Stop()
	<-closed
}

func (s *snapshotSub) endedBy(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// Stop implements [facade.Subscription].
func (s *snapshotSub) Stop(ctx context.Context) error {
	s.cancel()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Drain implements [facade.Subscription]: a snapshot subscription has
// nothing to settle, so it is Stop.
func (s *snapshotSub) Drain(ctx context.Context) error { return s.Stop(ctx) }

// Done implements [facade.Subscription].
func (s *snapshotSub) Done() <-chan struct{} { return s.done }

// Err implements [facade.Subscription]: the handler error that ended the
// subscription, or ErrClosed when the bus or its connection closed.
func (s *snapshotSub) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
