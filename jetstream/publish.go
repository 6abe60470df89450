package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

// Publish implements [facade.Publisher]. It creates the topic's stream on
// first use. A ctx without a deadline gets Config.RequestTimeout.
func (b *Bus) Publish(ctx context.Context, topic string, payload json.RawMessage, opts facade.PublishOptions) (*facade.EventRecord, error) {
	e, msg, ti, err := b.prepare(ctx, topic, payload, &opts)
	if err != nil {
		return nil, err
	}
	// nats.go applies Config.RequestTimeout to a ctx without a deadline.
	ack, err := b.js.PublishMsg(ctx, msg)
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		// The stream may have been deleted since it was cached: provision it
		// again and retry once. The id makes the retry idempotent.
		b.forgetTopic(ti.topic)
		if _, err2 := b.topic(ctx, topic); err2 == nil {
			ack, err = b.js.PublishMsg(ctx, msg)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", topic, translate(err))
	}
	if ack.Duplicate {
		return b.stored(ctx, ti, ack.Sequence, e), nil
	}
	e.Seq = ack.Sequence
	ti.obs.Published()
	return e, nil
}

// stored answers a publish that JetStream found to be a duplicate (same id
// within the duplicate window): the event as it was first stored, with its
// position and time. Should the lookup fail, e with the stored position.
func (b *Bus) stored(ctx context.Context, ti *topicInfo, seq uint64, e *facade.EventRecord) *facade.EventRecord {
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	raw, err := ti.stream.GetMsg(ctx, seq)
	if err != nil {
		b.log.Debug("duplicate publish: stored event not readable", "topic", ti.topic, "seq", seq, "err", err)
		e.Seq = seq
		return e
	}
	return fromMsg(raw.Subject, raw.Header, raw.Data, raw.Sequence, raw.Time)
}

// prepare validates a publish and builds its message.
func (b *Bus) prepare(ctx context.Context, topic string, payload json.RawMessage, opts *facade.PublishOptions) (*facade.EventRecord, *nats.Msg, *topicInfo, error) {
	if b.isClosed() {
		return nil, nil, nil, facade.ErrClosed
	}
	if err := b.waitConnected(ctx); err != nil {
		return nil, nil, nil, err
	}
	e, err := newRecord(topic, payload, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	ti, err := b.topic(ctx, topic)
	if err != nil {
		return nil, nil, nil, err
	}
	if e.Key != "" && !ti.keyed {
		return nil, nil, nil, fmt.Errorf("%w: stream %s does not capture keyed subjects of %s", facade.ErrBadKey, ti.name, topic)
	}
	if e.Key == "" && ti.compacted {
		return nil, nil, nil, fmt.Errorf("%w: %s", facade.ErrKeyRequired, topic)
	}
	msg, err := toMsg(subjectFor(topic, e.Key), e)
	if err != nil {
		return nil, nil, nil, err
	}
	return e, msg, ti, nil
}

// PublishAsync implements [facade.AsyncPublisher]. It blocks while
// Config.PublishAsyncMaxPending publishes are unacknowledged, for up to
// Config.RequestTimeout (then ErrUnavailable).
func (b *Bus) PublishAsync(ctx context.Context, topic string, payload json.RawMessage, opts facade.PublishOptions) (facade.PublishFuture, error) {
	e, msg, ti, err := b.prepare(ctx, topic, payload, &opts)
	if err != nil {
		return nil, err
	}
	f, err := b.js.PublishMsgAsync(msg, b.stallWait)
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", topic, translate(err))
	}
	ti.obs.Published()
	return &future{b: b, ti: ti, e: e, f: f}, nil
}

// waitConnected returns at once while the connection is up. While it is
// down (the server unreachable, nats.go reconnecting) it waits up to
// Config.DisconnectedWait for it to come back, then fails with
// ErrUnavailable instead of letting the publish hang for the whole request
// timeout.
func (b *Bus) waitConnected(ctx context.Context) error {
	if b.nc.Status() == nats.CONNECTED {
		return nil
	}
	deadline := time.NewTimer(b.cfg.DisconnectedWait)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		switch st := b.nc.Status(); st {
		case nats.CONNECTED:
			return nil
		case nats.CLOSED:
			return facade.ErrClosed
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return fmt.Errorf("%w: the NATS connection is down (%s) and did not come back within %v", facade.ErrUnavailable, strings.ToLower(b.nc.Status().String()), b.cfg.DisconnectedWait)
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", facade.ErrUnavailable, ctx.Err())
		}
	}
}

type future struct {
	b  *Bus
	ti *topicInfo
	e  *facade.EventRecord
	f  jetstream.PubAckFuture

	mu   sync.Mutex
	done bool
	err  error
}

func (f *future) Wait(ctx context.Context) (*facade.EventRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return f.e, f.err
	}
	select {
	case ack := <-f.f.Ok():
		if ack.Duplicate {
			f.e = f.b.stored(ctx, f.ti, ack.Sequence, f.e)
		} else {
			f.e.Seq = ack.Sequence
		}
	case err := <-f.f.Err():
		f.err = fmt.Errorf("publish %s: %w", f.e.Topic, translate(err))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	f.done = true
	if f.err != nil {
		return nil, f.err
	}
	return f.e, nil
}
