package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

var _ facade.LiveReader = (*Bus)(nil)

// readBatch is how many events one fetch of ReadAfter asks for.
const readBatch = 500

// Follow implements [facade.Follower] with an ordered consumer: ephemeral,
// ack-less and in memory on the server; nats.go re-creates it from the last
// sequence seen when it stalls or the server restarts, so fn sees no gap
// and no duplicate.
func (b *Bus) Follow(ctx context.Context, topic string, after uint64, fn func(*facade.EventRecord)) (facade.Subscription, error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: nil handler", facade.ErrInvalidOption)
	}
	if b.isClosed() {
		return nil, facade.ErrClosed
	}
	ti, err := b.topic(ctx, topic)
	if err != nil {
		return nil, err
	}
	if after == facade.AfterNow {
		// From the stream's end as of now (nats.go creates an ordered
		// consumer when it starts consuming, so "deliver new" would start
		// later than this call).
		rctx, cancel := b.withTimeout(ctx)
		info, err := ti.stream.Info(rctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("follow %s: %w", topic, translate(err))
		}
		after = info.State.LastSeq
	}
	return b.follow(ctx, ti, ti.filters, after, func(_ context.Context, e *facade.EventRecord) error {
		fn(e)
		return nil
	})
}

// follow starts a follower of filters in ti's stream after position after.
// An error from fn ends it (Err returns that error).
func (b *Bus) follow(ctx context.Context, ti *topicInfo, filters []string, after uint64, fn func(context.Context, *facade.EventRecord) error) (*follower, error) {
	rctx, cancel := b.withTimeout(ctx)
	defer cancel()
	oc, err := ti.stream.OrderedConsumer(rctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: filters,
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    after + 1,
	})
	if err != nil {
		return nil, fmt.Errorf("follow %s: %w", ti.topic, translate(err))
	}
	f := &follower{b: b, ti: ti, oc: oc, topic: ti.topic, fn: fn, last: after, done: make(chan struct{})}
	f.ctx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))

	b.subsMu.Lock()
	if b.closed {
		b.subsMu.Unlock()
		f.cancel()
		return nil, facade.ErrClosed
	}
	b.wg.Add(1)
	b.subsMu.Unlock()

	cc, err := oc.Consume(f.onMsg,
		jetstream.PullExpiry(b.cfg.PullExpiry),
		jetstream.PullHeartbeat(b.cfg.PullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			b.log.Debug("follow", "topic", ti.topic, "err", err)
		}),
	)
	if err != nil {
		b.wg.Done()
		f.cancel()
		return nil, fmt.Errorf("follow %s: %w", ti.topic, translate(err))
	}
	go func() {
		defer b.wg.Done()
		f.run(cc)
	}()
	return f, nil
}

// follower is one subscription that follows a stream without a group.
type follower struct {
	b     *Bus
	ti    *topicInfo
	oc    jetstream.Consumer // the ordered consumer, deleted when it stops
	topic string
	fn    func(context.Context, *facade.EventRecord) error
	last  uint64 // the last position handed to fn (the onMsg goroutine's)

	ctx    context.Context // cancelled when it stops
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	mu  sync.Mutex
	err error // why it ended on its own
}

var _ facade.Subscription = (*follower)(nil)

// onMsg runs on the ordered consumer's goroutine, one message at a time.
func (f *follower) onMsg(msg jetstream.Msg) {
	if f.ctx.Err() != nil {
		return
	}
	meta, err := msg.Metadata()
	if err != nil {
		return
	}
	seq := meta.Sequence.Stream
	if seq <= f.last {
		return // never twice
	}
	f.last = seq
	if err := f.fn(f.ctx, fromMsg(msg.Subject(), msg.Headers(), msg.Data(), seq, meta.Timestamp)); err != nil {
		f.endedBy(err)
		f.cancel()
	}
}

func (f *follower) run(cc jetstream.ConsumeContext) {
	defer close(f.done)
	closed := cc.Closed()
	select {
	case <-f.ctx.Done():
	case <-closed:
		f.endedBy(fmt.Errorf("%w: the connection closed", facade.ErrClosed))
	case <-f.b.done:
		f.endedBy(fmt.Errorf("%w: the bus closed", facade.ErrClosed))
	}
	f.cancel()
	cc.Stop()
	<-closed
	select {
	case <-f.b.done:
	default:
		f.b.deleteOrdered(f.ti, f.oc)
	}
}

// deleteOrdered deletes the server consumer an ordered consumer is on,
// best effort: nats.go leaves it until its inactive threshold.
func (b *Bus) deleteOrdered(ti *topicInfo, oc jetstream.Consumer) {
	info := oc.CachedInfo()
	if info == nil || b.nc.IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := ti.stream.DeleteConsumer(ctx, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		b.log.Debug("delete ordered consumer", "topic", ti.topic, "consumer", info.Name, "err", err)
	}
}

func (f *follower) endedBy(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

// Stop implements [facade.Subscription]; a running fn is awaited.
func (f *follower) Stop(ctx context.Context) error {
	f.cancel()
	select {
	case <-f.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Drain implements [facade.Subscription]: there is nothing to settle.
func (f *follower) Drain(ctx context.Context) error { return f.Stop(ctx) }

// Done implements [facade.Subscription].
func (f *follower) Done() <-chan struct{} { return f.done }

// Err implements [facade.Subscription]: what ended it on its own (an error
// of its handler, or ErrClosed when the bus or its connection closed).
func (f *follower) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// ReadAfter implements [facade.LiveReader] with an ordered consumer read by
// no-wait fetches: it ends at the stream's end as the server sees it
// during the read. The read is complete when the stream still holds
// position after+1.
func (b *Bus) ReadAfter(ctx context.Context, topic string, after uint64, limit int, fn func(*facade.EventRecord) error) (facade.ReadResult, error) {
	var res facade.ReadResult
	if limit <= 0 {
		return res, fmt.Errorf("%w: limit must be positive", facade.ErrInvalidOption)
	}
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, err := b.topic(ctx, topic)
	if err != nil {
		return res, err
	}
	return b.readAfter(ctx, ti, ti.filters, after, limit, fn)
}

// readAfter is [Bus.ReadAfter] of the subjects filters of ti's stream.
func (b *Bus) readAfter(ctx context.Context, ti *topicInfo, filters []string, after uint64, limit int, fn func(*facade.EventRecord) error) (facade.ReadResult, error) {
	var res facade.ReadResult
	topic := ti.topic
	info, err := ti.stream.Info(ctx)
	if err != nil {
		return res, fmt.Errorf("read %s: %w", topic, translate(err))
	}
	st := info.State
	res.First, res.Last = st.FirstSeq, st.LastSeq
	res.Complete = after+1 >= st.FirstSeq
	if after >= st.LastSeq {
		return res, nil
	}
	oc, err := ti.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: filters,
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    after + 1,
	})
	if err != nil {
		return res, fmt.Errorf("read %s: %w", topic, translate(err))
	}
	// nats.go leaves an ordered consumer's last server consumer behind
	// until its inactive threshold: one per recovery, minutes each.
	defer b.deleteOrdered(ti, oc)
	for {
		n := min(readBatch, limit-res.Read+1) // one more than the limit tells whether more follow
		batch, err := oc.FetchNoWait(n)
		if err != nil {
			return res, fmt.Errorf("read %s: %w", topic, translate(err))
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			if res.Read == limit {
				res.More = true
				continue
			}
			meta, err := msg.Metadata()
			if err != nil {
				continue
			}
			if err := fn(fromMsg(msg.Subject(), msg.Headers(), msg.Data(), meta.Sequence.Stream, meta.Timestamp)); err != nil {
				return res, err
			}
			res.Read++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return res, fmt.Errorf("read %s: %w", topic, translate(err))
		}
		if res.More || got < n {
			return res, nil
		}
	}
}
