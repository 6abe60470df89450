package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventhub/eventhub/facade"
)

// Publish implements [facade.Publisher]. It creates the topic's stream on
// first use. A ctx without a deadline gets Config.RequestTimeout.
//
// A publish with an id of the caller's (opts.ID) is idempotent within the
// stream's duplicate window: the event carries the id as Nats-Msg-Id, and
// a repeat is answered with the event as first stored. So is a publish to
// a replicated stream, whose id the hub made: the hub retries it while the
// stream elects a leader (see publishMsg), and a retry is matched only
// against an earlier copy that carried Nats-Msg-Id, the first attempt
// included. Any other publish (a hub-made id on a single-replica stream)
// cannot be sent twice: it carries no id, and its id is [PosID] of the
// sequence the store acknowledges (see toMsg).
func (b *Bus) Publish(ctx context.Context, topic string, payload json.RawMessage, opts facade.PublishOptions) (*facade.EventRecord, error) {
	return b.publish(ctx, topic, payload, opts, "")
}

// PublishDerived publishes an event the hub derives from a stored one (a
// dead letter, a redriven dead letter) and may publish again (a retry after
// a failure, a second redrive). Its id is a fresh uuidv7 unless opts.ID is
// set, so it is a position like every id the hub makes; dedupKey, derived
// from the source, travels as Nats-Msg-Id, so a repeat within the stream's
// duplicate window stores nothing new and is answered with the event as
// first stored, its id included.
func (b *Bus) PublishDerived(ctx context.Context, topic string, payload json.RawMessage, opts facade.PublishOptions, dedupKey string) (*facade.EventRecord, error) {
	return b.publish(ctx, topic, payload, opts, dedupKey)
}

// publish is Publish, with dedupKey (when not empty) as Nats-Msg-Id.
func (b *Bus) publish(ctx context.Context, topic string, payload json.RawMessage, opts facade.PublishOptions, dedupKey string) (*facade.EventRecord, error) {
	e, msg, ti, err := b.prepare(ctx, topic, payload, &opts, true, dedupKey)
	if err != nil {
		return nil, err
	}
	span := b.startPublish(ctx, e, msg)
	ack, err := b.publishMsg(ctx, ti, msg)
	if err != nil {
		endPublish(span, nil, err)
		return nil, fmt.Errorf("publish %s: %w", topic, translate(err))
	}
	if ack.Duplicate {
		e = b.stored(ctx, ti, ack.Sequence, e)
	} else {
		settle(e, ack.Sequence)
		ti.obs.Published()
	}
	endPublish(span, e, nil)
	return e, nil
}

// publishMsg stores msg, riding through a leader election of its stream.
// Two kinds of failure are retried, with the same message, for up to
// Config.ElectionWait or the ctx deadline:
//
//   - no one answered for the stream at all (no responders, or JetStream
//     temporarily unavailable): the message was not stored, so a retry is
//     safe for any message;
//   - no answer in time (a leader lost mid-request, a node gone): the
//     message may have been stored, so only a message with Nats-Msg-Id is
//     retried, which JetStream then stores once. Such a message is tried
//     for up to 3s at a time.
//
// Only a replicated stream elects leaders, so Publish sends hub-made ids
// to replicated streams with Nats-Msg-Id (see Publish). A message without
// it is not retried after a timeout, and its attempt may take the whole
// Config.RequestTimeout: whether it was stored is then the caller's to
// resolve (an id of its own makes a repeat safe). publishMsg logs the loss of the leader
// and, once a retry goes through, how long it took.
func (b *Bus) publishMsg(ctx context.Context, ti *topicInfo, msg *nats.Msg) (*jetstream.PubAck, error) {
	start := time.Now()
	deadline := start.Add(b.cfg.ElectionWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	idempotent := msg.Header.Get(HeaderMsgID) != ""
	attemptTimeout := b.cfg.RequestTimeout
	if idempotent {
		attemptTimeout = min(attemptTimeout, 3*time.Second)
	}
	reprovisioned := false
	backoff := 50 * time.Millisecond
	for tries := 1; ; tries++ {
		actx, cancel := context.WithTimeout(ctx, min(attemptTimeout, max(time.Until(deadline), time.Millisecond)))
		ack, err := b.js.PublishMsg(actx, msg)
		cancel()
		if err == nil {
			if tries > 1 {
				b.log.Info("publish went through after the stream's leader was lost",
					"stream", ti.name, "topic", ti.topic, "waited", time.Since(start).Round(time.Millisecond), "tries", tries)
			}
			return ack, nil
		}
		if errors.Is(err, jetstream.ErrNoStreamResponse) && !reprovisioned && !replicated(ti) {
			// A single-replica stream that no one answers for may have been
			// deleted since it was cached: provision it again. (A
			// replicated one is electing a leader: retry below.)
			// (Bounded like one attempt: in a cluster that lost a node the
			// lookup itself may wait for a leader.)
			reprovisioned = true
			b.forgetTopic(ti.topic)
			pctx, cancel := context.WithTimeout(ctx, min(attemptTimeout, 3*time.Second))
			nti, err2 := b.topic(pctx, ti.topic)
			cancel()
			if err2 == nil {
				ti = nti
			}
		}
		retry := notStored(err) || idempotent && timedOut(err)
		if !retry || ctx.Err() != nil || time.Now().Add(backoff).After(deadline) {
			if tries > 1 {
				return nil, fmt.Errorf("%w (after %d tries over %v: the stream had no leader)", err, tries, time.Since(start).Round(time.Millisecond))
			}
			return nil, err
		}
		if tries == 1 {
			b.log.Warn("stream has no leader (a node failed or an election is running); retrying the publish",
				"stream", ti.name, "topic", ti.topic, "err", err, "for_up_to", time.Until(deadline).Round(time.Millisecond))
		}
		if err := b.waitConnected(ctx); err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// replicated reports whether ti's stream has more than one replica, and so
// can lose its leader and elect another while a publish waits.
func replicated(ti *topicInfo) bool {
	info := ti.stream.CachedInfo()
	return info != nil && info.Config.Replicas > 1
}

// notStored reports whether a publish error means JetStream had no one to
// store the message just then (no stream listening, the system
// temporarily unavailable): it was not stored, and a retry soon may be.
func notStored(err error) bool {
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		return true
	}
	if ae, ok := errors.AsType[*jetstream.APIError](err); ok {
		return ae.ErrorCode == 10008 // JetStream system temporarily unavailable
	}
	return false
}

// timedOut reports whether a publish got no answer in time: its message
// may or may not have been stored.
func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}

// settle completes the record of a publish the store acknowledged at seq:
// its position and, when the hub made no id for it, the id derived from
// that position.
func settle(e *facade.EventRecord, seq uint64) {
	e.Seq = seq
	if e.ID == "" {
		e.ID = PosID(e.Topic, e.TS, seq)
	}
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
		settle(e, seq)
		return e
	}
	return fromMsg(raw.Subject, raw.Header, raw.Data, raw.Sequence, raw.Time)
}

// prepare validates a publish and builds its message. The message carries
// Nats-Msg-Id when the caller supplied the id (the id), when dedupKey is
// set (dedupKey), or when mayRetry (the hub retries timeouts of this
// publish) and the stream is replicated (a fresh uuidv7, the event's id).
// Otherwise, unless the caller set the time, the record gets no id until
// the store acknowledges it (see settle) and the message carries only the
// time.
func (b *Bus) prepare(ctx context.Context, topic string, payload json.RawMessage, opts *facade.PublishOptions, mayRetry bool, dedupKey string) (*facade.EventRecord, *nats.Msg, *topicInfo, error) {
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
	if opts.TTLSeconds > 0 && !ttlAllowed(ti) {
		if ti, err = b.allowTTL(ctx, ti); err != nil {
			return nil, nil, nil, err
		}
	}
	retried := mayRetry && replicated(ti)
	if e.ID == "" && (retried || dedupKey != "" || opts.TS != 0) {
		e.ID = facade.NewID()
	}
	if e.ID == "" && b.tracer == nil && opts.ExpectedLastSeq == nil && opts.TTLSeconds == 0 && onlyTime(e) {
		// The commonest publish: its message is its time alone.
		return e, &nats.Msg{Subject: subjectFor(topic, e.Key), Header: b.timeHeader(e.TS), Data: e.Payload}, ti, nil
	}
	msg, err := toMsg(subjectFor(topic, e.Key), e, opts.ID != "" || retried)
	if err != nil {
		return nil, nil, nil, err
	}
	if dedupKey != "" {
		msg.Header[HeaderMsgID] = []string{dedupKey}
	}
	if opts.ExpectedLastSeq != nil {
		msg.Header[jetstream.ExpectedLastSubjSeqHeader] = []string{strconv.FormatUint(*opts.ExpectedLastSeq, 10)}
	}
	if opts.TTLSeconds > 0 {
		msg.Header[jetstream.MsgTTLHeader] = []string{strconv.FormatInt(opts.TTLSeconds, 10)}
	}
	return e, msg, ti, nil
}

// PublishAsync implements [facade.AsyncPublisher]. It blocks while
// Config.PublishAsyncMaxPending publishes are unacknowledged, for up to
// Config.RequestTimeout (then ErrUnavailable). The hub does not retry an
// asynchronous publish: it is idempotent only with an id of the caller's
// (opts.ID), which it sends as Nats-Msg-Id. Without one, the event's id is
// [PosID] of the sequence the store acknowledges.
func (b *Bus) PublishAsync(ctx context.Context, topic string, payload json.RawMessage, opts facade.PublishOptions) (facade.PublishFuture, error) {
	e, msg, ti, err := b.prepare(ctx, topic, payload, &opts, false, "")
	if err != nil {
		return nil, err
	}
	span := b.startPublish(ctx, e, msg)
	f, err := b.sendAsync(msg)
	if err != nil {
		endPublish(span, nil, err)
		return nil, fmt.Errorf("publish %s: %w", topic, translate(err))
	}
	ti.obs.Published()
	return &future{b: b, ti: ti, e: e, f: f, span: span}, nil
}

// natsStallWait is how long nats.go's PublishMsgAsync waits for room in
// its window of unacknowledged publishes when given no option.
const natsStallWait = 200 * time.Millisecond

// stallWaitAfterDefault is the option that makes a publish wait for room
// in the window for the rest of timeout after nats.go's own wait; nil when
// timeout is no longer than that.
func stallWaitAfterDefault(timeout time.Duration) jetstream.PublishOpt {
	if timeout <= natsStallWait {
		return nil
	}
	return jetstream.WithStallWait(timeout - natsStallWait)
}

// sendAsync sends msg as nats.go's PublishMsgAsync does without options
// (an option costs an allocation and a pass over every option on each
// publish); when the window stayed full for nats.go's wait, which sends
// nothing, it waits again for the rest of Config.RequestTimeout.
func (b *Bus) sendAsync(msg *nats.Msg) (jetstream.PubAckFuture, error) {
	f, err := b.js.PublishMsgAsync(msg)
	if errors.Is(err, jetstream.ErrTooManyStalledMsgs) && b.stallWait != nil {
		f, err = b.js.PublishMsgAsync(msg, b.stallWait)
	}
	return f, err
}

// onlyTime reports whether the message of e, which has no id, carries
// nothing but its time.
func onlyTime(e *facade.EventRecord) bool {
	return e.SID == "" && e.Partition == nil && len(e.Headers) == 0 && len(e.Tags) == 0 && len(e.CausedBy) == 0
}

// tsHeader is the header of the plain publishes of one millisecond.
type tsHeader struct {
	ms int64
	h  nats.Header
}

// timeHeader returns the header of a message that carries only its time,
// ms: one per millisecond, shared by the publishes within it (nats.go
// only reads a message's header; the hub adds nothing to these).
func (b *Bus) timeHeader(ms int64) nats.Header {
	if t := b.tsHeader.Load(); t != nil && t.ms == ms {
		return t.h
	}
	t := &tsHeader{ms: ms, h: nats.Header{HeaderTS: {strconv.FormatInt(ms, 10)}}}
	b.tsHeader.Store(t)
	return t.h
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
	// span is the publish's, ended by the first Wait that sees its
	// outcome; nil when the bus does not trace.
	span trace.Span

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
			settle(f.e, ack.Sequence)
		}
	case err := <-f.f.Err():
		f.err = fmt.Errorf("publish %s: %w", f.e.Topic, translate(err))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	f.done = true
	endPublish(f.span, f.e, f.err)
	if f.err != nil {
		return nil, f.err
	}
	return f.e, nil
}
