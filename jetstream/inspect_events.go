package jetstream

// Reading and removing the stored events of a topic for the ops endpoints
// and the admin API: one event, a scan of a range, a replay of a range,
// purges, and the settings of a topic's own stream. Every answer is a
// NATS-free value of package inspect.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/inspect"
)

// Topic returns where topic is stored and its stream's limits, without
// creating anything (see [Bus.LookupTopic]). topic may be a pattern a group
// reads (a topic family): its stream is the family's. Errors wrap
// [facade.ErrBadTopic], [facade.ErrNotFound] when no stream captures the
// topic, or [facade.ErrUnavailable].
func (b *Bus) Topic(ctx context.Context, topic string) (*inspect.Topic, error) {
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, err := b.groupTopic(ctx, topic, false)
	if err != nil {
		return nil, err
	}
	out := &inspect.Topic{
		Topic: ti.topic, StreamName: ti.name, Filters: slices.Clone(ti.filters),
		Keyed: ti.keyed, Compacted: ti.compacted, Shared: ti.shared,
	}
	if ci := ti.stream.CachedInfo(); ci != nil {
		out.MaxAge, out.DuplicateWindow = ci.Config.MaxAge, ci.Config.Duplicates
		out.MaxBytes = max(ci.Config.MaxBytes, 0)
	}
	return out, nil
}

// StreamState returns how much the stream of topic holds now (one
// JetStream API request). Errors wrap [facade.ErrNotFound] when no stream
// captures the topic, or [facade.ErrUnavailable].
func (b *Bus) StreamState(ctx context.Context, topic string) (inspect.StreamState, error) {
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, err := b.groupTopic(ctx, topic, false)
	if err != nil {
		return inspect.StreamState{}, err
	}
	info, err := ti.stream.Info(ctx)
	if err != nil {
		return inspect.StreamState{}, fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, ti.name, err)
	}
	st := info.State
	return inspect.StreamState{Messages: st.Msgs, Bytes: st.Bytes, FirstSeq: st.FirstSeq, LastSeq: st.LastSeq}, nil
}

// ofTopic reports whether a subject of ti's stream belongs to ti's topic.
func (ti *topicInfo) ofTopic(subject string) bool {
	return subject == ti.topic || (ti.keyed && strings.HasPrefix(subject, keyedPrefix(ti.topic)))
}

// scanFilters returns the filter subjects of ti's events with key (all of
// them when key is empty); nil when no event of the topic can have key.
func (ti *topicInfo) scanFilters(key string) []string {
	if key == "" {
		return ti.filters
	}
	if !ti.keyed {
		return nil
	}
	return []string{subjectFor(ti.topic, key)}
}

func storedEvent(subject string, h nats.Header, data []byte, seq uint64, stored time.Time) *inspect.StoredEvent {
	return &inspect.StoredEvent{
		Event: fromMsg(subject, h, data, seq, stored), Subject: subject, Headers: h, Stored: stored,
	}
}

// Event returns the message of topic at stream sequence seq with its
// headers. Errors wrap [facade.ErrNotFound] when the topic has no event
// there (or no stream), or [facade.ErrUnavailable].
func (a *Admin) Event(ctx context.Context, topic string, seq uint64) (*inspect.StoredEvent, error) {
	b := a.Bus
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, err := b.existingTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	raw, err := ti.stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) || err == nil && !ti.ofTopic(raw.Subject) {
		return nil, fmt.Errorf("%w: topic %s has no event at %d", facade.ErrNotFound, ti.topic, seq)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, ti.name, err)
	}
	return storedEvent(raw.Subject, raw.Header, raw.Data, raw.Sequence, raw.Time), nil
}

// DeleteEvent removes the message at stream sequence seq of topic's
// stream. Errors wrap [facade.ErrNotFound] when there is none, or
// [facade.ErrUnavailable].
func (a *Admin) DeleteEvent(ctx context.Context, topic string, seq uint64) error {
	b := a.Bus
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, err := b.existingTopic(ctx, topic)
	if err != nil {
		return err
	}
	err = ti.stream.DeleteMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) || noMessage(err) {
		return fmt.Errorf("%w: topic %s has no event at %d", facade.ErrNotFound, ti.topic, seq)
	}
	if err != nil {
		return fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, ti.name, err)
	}
	return nil
}

// noMessage reports whether err is the server's answer to deleting a
// message that is not there: nats.go reports it as a failed delete with
// the server's description in the text ("no message found").
func noMessage(err error) bool {
	return errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) && strings.Contains(err.Error(), "no message found")
}

// Scan reads the events of topic that s selects, in order, through a
// short-lived consumer deleted on return, and calls fn for each until fn
// returns false, s.Max messages were read, or the stream has no more. It
// returns the sequence to go on from and whether the end was reached. It
// never holds more than one fetch batch. ctx bounds the whole scan.
func (a *Admin) Scan(ctx context.Context, topic string, s inspect.Scan, fn func(e *inspect.StoredEvent) bool) (next uint64, end bool, err error) {
	b := a.Bus
	next = max(s.From, 1)
	ti, err := b.groupTopic(ctx, topic, false)
	if err != nil {
		return next, false, err
	}
	filters := ti.scanFilters(s.Key)
	if filters == nil {
		return next, true, nil
	}
	cc := jetstream.ConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       next,
		AckPolicy:         jetstream.AckNonePolicy,
		HeadersOnly:       s.HeadersOnly,
		MemoryStorage:     true,
		InactiveThreshold: 30 * time.Second,
	}
	if len(filters) == 1 {
		cc.FilterSubject = filters[0]
	} else {
		cc.FilterSubjects = filters
	}
	cons, err := ti.stream.CreateConsumer(ctx, cc)
	if err != nil {
		return next, false, fmt.Errorf("%w: read %s: %w", facade.ErrUnavailable, ti.name, err)
	}
	defer b.dropConsumer(ctx, ti.name, cons)
	read := 0
	for read < s.Max {
		batch, err := cons.FetchNoWait(min(256, s.Max-read))
		if err != nil {
			return next, false, fmt.Errorf("%w: read %s: %w", facade.ErrUnavailable, ti.name, err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			read++
			meta, err := msg.Metadata()
			if err != nil {
				continue
			}
			next = meta.Sequence.Stream + 1
			if !fn(storedEvent(msg.Subject(), msg.Headers(), msg.Data(), meta.Sequence.Stream, meta.Timestamp)) {
				return next, meta.NumPending == 0, nil
			}
			if meta.NumPending == 0 {
				return next, true, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return next, false, fmt.Errorf("%w: read %s: %w", facade.ErrUnavailable, ti.name, err)
		}
		if n == 0 {
			return next, true, nil
		}
	}
	return next, false, nil
}

// dropConsumer removes a scan's or replay's consumer at once rather than
// leaving it to its inactivity threshold.
func (b *Bus) dropConsumer(ctx context.Context, stream string, cons jetstream.Consumer) {
	ci := cons.CachedInfo()
	if ci == nil {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = b.js.DeleteConsumer(dctx, stream, ci.Name)
}

// Replay reads the events of topic in r, in order, through an ordered
// consumer deleted on return, and calls fn for each until fn returns
// false or an error, the range is read, or ctx ends. Memory stays bounded
// by r.Batch messages however long the range. When nothing arrives for
// r.StallWait and the range holds no more events (deleted under the
// replay), the replay is complete. Errors wrap [facade.ErrNotFound],
// [facade.ErrUnavailable], ctx's error, or fn's error.
func (b *Bus) Replay(ctx context.Context, topic string, r inspect.ReplayRange, fn func(e *inspect.StoredEvent) (bool, error)) error {
	ti, err := b.existingTopic(ctx, topic)
	if err != nil {
		return err
	}
	filters := ti.scanFilters(r.Key)
	if filters == nil || r.From > r.To {
		return nil
	}
	cons, err := ti.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects:    filters,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       r.From,
		InactiveThreshold: time.Minute,
		MaxResetAttempts:  5,
	})
	if err != nil {
		return fmt.Errorf("%w: replay consumer on %s: %w", facade.ErrUnavailable, ti.name, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(max(r.Batch, 1)))
	if err != nil {
		return fmt.Errorf("%w: replay consumer on %s: %w", facade.ErrUnavailable, ti.name, err)
	}
	stopOnCancel := context.AfterFunc(ctx, it.Stop)
	defer func() {
		stopOnCancel()
		it.Stop()
		b.dropConsumer(ctx, ti.name, cons)
	}()
	var scanned uint64 // the last sequence read
	wait := jetstream.NextMaxWait(cmpDuration(r.StallWait, 2*time.Second))
	for {
		msg, err := it.Next(wait)
		if errors.Is(err, nats.ErrTimeout) {
			// Nothing arrived for a while: if the range holds no more
			// events (deleted under us), it is complete.
			next, ok, err := b.NextSeq(ctx, topic, r.Key, max(scanned+1, r.From))
			if err == nil && (!ok || next > r.To) {
				return nil
			}
			if err != nil && ctx.Err() == nil {
				return err
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: replay of %s: %w", facade.ErrUnavailable, topic, err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("replay of %s: %w", topic, err)
		}
		seq := meta.Sequence.Stream
		if seq > r.To {
			return nil
		}
		scanned = seq
		more, err := fn(storedEvent(msg.Subject(), msg.Headers(), msg.Data(), seq, meta.Timestamp))
		if err != nil || !more || seq >= r.To || meta.NumPending == 0 {
			return err
		}
	}
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// purgeRequest is JetStream's stream purge request (JSApiStreamPurgeRequest).
type purgeRequest struct {
	Filter string `json:"filter,omitempty"`
	// Seq: purge up to but not including this sequence.
	Seq uint64 `json:"seq,omitempty"`
}

// Purge removes events of topic and returns how many: all of them, or
// with key (non-empty) every event of that key; with upTo > 0 only those
// up to and including stream sequence upTo. A shared stream loses only the
// topic's events. Groups keep their cursors. Errors wrap
// [facade.ErrBadKey] (a key on a stream that does not capture keys),
// [facade.ErrNotFound], or [facade.ErrUnavailable].
func (a *Admin) Purge(ctx context.Context, topic, key string, upTo uint64) (uint64, error) {
	b := a.Bus
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, err := b.existingTopic(ctx, topic)
	if err != nil {
		return 0, err
	}
	if key != "" && !ti.keyed {
		return 0, fmt.Errorf("%w: the stream of %s does not capture keys", facade.ErrBadKey, ti.topic)
	}
	var req purgeRequest
	if upTo > 0 {
		req.Seq = upTo + 1
	}
	if !ti.shared && key == "" {
		return b.purge(ctx, ti.name, req)
	}
	var purged uint64
	for _, subj := range ti.scanFilters(key) {
		req.Filter = subj
		n, err := b.purge(ctx, ti.name, req)
		purged += n
		if err != nil {
			return purged, err
		}
	}
	return purged, nil
}

// purge sends a stream purge and returns how many messages it removed
// (nats.go's Purge does not say).
func (b *Bus) purge(ctx context.Context, stream string, req purgeRequest) (uint64, error) {
	body, _ := json.Marshal(req)
	resp, err := b.nc.RequestWithContext(ctx, "$JS.API.STREAM.PURGE."+stream, body)
	if err != nil {
		return 0, fmt.Errorf("%w: purge %s: %w", facade.ErrUnavailable, stream, err)
	}
	var pr struct {
		Success bool   `json:"success"`
		Purged  uint64 `json:"purged"`
		Error   *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &pr); err != nil {
		return 0, fmt.Errorf("%w: purge %s: %w", facade.ErrUnavailable, stream, err)
	}
	if pr.Error != nil {
		return 0, fmt.Errorf("%w: purge %s: %s", facade.ErrUnavailable, stream, pr.Error.Description)
	}
	return pr.Purged, nil
}

// DeclareTopicSettings declares the stream of s.Topic with s's settings
// ([Admin.DeclareTopic]). Settings that are not valid are refused with an
// error wrapping [inspect.ErrBadSettings] before anything is changed.
func (a *Admin) DeclareTopicSettings(ctx context.Context, s inspect.TopicSettings) (name string, created bool, err error) {
	tc := TopicConfig{
		Pattern: s.Topic, MaxAge: s.MaxAge, MaxBytes: s.MaxBytes, DuplicateWindow: s.DuplicateWindow,
		Compaction: s.Compaction, Storage: s.Storage, Replicas: s.Replicas,
	}
	if err := (Config{Topics: []TopicConfig{tc}}).Validate(); err != nil {
		return "", false, fmt.Errorf("%w: %w", inspect.ErrBadSettings, err)
	}
	return a.DeclareTopic(ctx, tc)
}
