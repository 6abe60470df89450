package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

var (
	_ facade.KeyScanner         = (*Bus)(nil)
	_ facade.CompactionReporter = (*Bus)(nil)
)

// Keyed events live on "<topic>._k.<key-token>" (see subjects.go and
// docs/keys.md), so the newest event of a key is the last message of one
// subject: JetStream answers that from its per-subject index (a direct get),
// and a batched direct get with "multi_last" answers it for many subjects in
// one request, consistently as of one stream sequence (nats-server 2.11+).

const (
	// multiLastMaxSubjects is nats-server's cap on the subjects one
	// multi_last request may match (getDirectMulti's maxAllowedResponses):
	// beyond it the server answers 413 and sends nothing.
	multiLastMaxSubjects = 1024
	// multiLastMaxReqBytes bounds the JSON body of a multi_last request with
	// literal subjects, well under the default 1 MiB max payload.
	multiLastMaxReqBytes = 256 << 10
	// directMaxBytes bounds one batched direct get response; the rest comes
	// in further pages.
	directMaxBytes = 4 << 20
	// latestByKeyMultiMin is the number of keys from which LatestByKey asks
	// with multi_last rather than one direct get per key (measured by
	// BenchmarkLatestByKeyStrategies: one get per key is as fast up to a few
	// keys, multi_last wins from about 4 and by far at 1000).
	latestByKeyMultiMin = 4
	// The consumer fallback of Latest fetches up to scanMaxBatch messages at a
	// time (as fast as a raw ordered consumer at 100,000 keys), fewer when
	// messages are large, so that one fetch holds about scanFetchBytes.
	scanFirstBatch = 256
	scanMaxBatch   = 4096
	scanFetchBytes = 8 << 20
)

// LatestByKey implements [facade.KeyReader]. Each key is a lookup of the last
// message on the key's subject, read from the stream's per-subject index,
// never a scan: one direct get for a few keys, batched direct gets
// ("multi_last" with the keys' subjects, up to 1024 per request) for more.
// Keys without events are absent from the map. ErrNotFound when the topic has
// no stream; ErrBadKey for an invalid key.
func (b *Bus) LatestByKey(ctx context.Context, topic string, keys []string) (map[string]*facade.EventRecord, error) {
	for _, k := range keys {
		if err := facade.ValidateKey(k); err != nil {
			return nil, err
		}
	}
	// No deadline of our own: nats.go applies Config.RequestTimeout to each
	// direct get, directGet to each message it waits for.
	ti, err := b.existingTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*facade.EventRecord, len(keys))
	if !ti.keyed {
		return out, nil // the stream cannot hold keyed events
	}
	// The subjects to look up, once each; the empty key means "no key".
	subjects := make(map[string]string, len(keys))
	for _, k := range keys {
		if k != "" {
			subjects[subjectFor(topic, k)] = k
		}
	}
	if len(subjects) < latestByKeyMultiMin || !ti.stream.CachedInfo().Config.AllowDirect {
		err = b.latestEach(ctx, ti, subjects, out)
	} else {
		err = b.latestMulti(ctx, ti, subjects, out)
	}
	if err != nil {
		b.forgetTopic(topic) // the stream may have gone; look it up again next time
		return nil, err
	}
	return out, nil
}

// latestEach looks keys up with one direct get each, one after the other.
func (b *Bus) latestEach(ctx context.Context, ti *topicInfo, subjects map[string]string, out map[string]*facade.EventRecord) error {
	for subj, k := range subjects {
		raw, err := ti.stream.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("latest of %s key %q: %w", ti.topic, k, translate(err))
		}
		e := fromMsg(raw.Subject, raw.Header, raw.Data, raw.Sequence, raw.Time)
		if e.Deleted {
			continue // a tombstone: the key has no value
		}
		e.Key = k
		out[k] = e
	}
	return nil
}

// latestMulti looks keys up with multi_last requests listing their subjects,
// in chunks the server accepts.
func (b *Bus) latestMulti(ctx context.Context, ti *topicInfo, subjects map[string]string, out map[string]*facade.EventRecord) error {
	chunk := make([]string, 0, min(len(subjects), multiLastMaxSubjects))
	size := 0
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		err := b.multiLast(ctx, ti, chunk, 0, func(e *facade.EventRecord, subj string) error {
			if e.Deleted {
				return nil // a tombstone: the key has no value
			}
			k := subjects[subj]
			e.Key = k
			out[k] = e
			return nil
		})
		chunk, size = chunk[:0], 0
		return err
	}
	for subj := range subjects {
		if len(chunk) == multiLastMaxSubjects || size+len(subj)+3 > multiLastMaxReqBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		chunk = append(chunk, subj)
		size += len(subj) + 3
	}
	return flush()
}

// Latest implements [facade.KeyScanner]: the newest event of every key of
// topic, as of the stream's last sequence N when the call starts, in stream
// order. With at most 1024 keys it is a batched direct get ("multi_last":
// ["<topic>._k.*"], "up_to_seq": N), which the server answers from its
// per-subject index in one consistent read. Beyond 1024 keys (the server
// refuses such a multi_last), or on a stream without direct gets, it reads
// an ephemeral consumer that delivers the last message per subject
// (DeliverLastPerSubject; on a compacted stream every message is one), up to N.
//
// A key updated after N while Latest runs may be missing from the result (on
// a compacted stream its event as of N is replaced; the consumer only sees
// each key's last event): its new event is after N. ErrNotFound when the
// topic has no stream.
func (b *Bus) Latest(ctx context.Context, topic string, fn func(*facade.EventRecord) error) (uint64, error) {
	if fn == nil {
		return 0, fmt.Errorf("%w: nil fn", facade.ErrInvalidOption)
	}
	ti, err := b.existingTopic(ctx, topic)
	if err != nil {
		return 0, err
	}
	n, err := b.snapshotSeq(ctx, ti)
	if err != nil {
		return 0, err
	}
	return n, b.latestUpTo(ctx, ti, n, fn)
}

// snapshotSeq is the stream's last sequence, the position a snapshot is
// taken at.
func (b *Bus) snapshotSeq(ctx context.Context, ti *topicInfo) (uint64, error) {
	rctx, cancel := b.withTimeout(ctx)
	defer cancel()
	info, err := ti.stream.Info(rctx)
	if err != nil {
		b.forgetTopic(ti.topic)
		return 0, fmt.Errorf("stream %s: %w", ti.name, translate(err))
	}
	return info.State.LastSeq, nil
}

// latestUpTo passes the newest event of every key of ti as of stream
// sequence n to fn.
func (b *Bus) latestUpTo(ctx context.Context, ti *topicInfo, n uint64, fn func(*facade.EventRecord) error) error {
	if n == 0 || !ti.keyed {
		return nil
	}
	all := fn
	fn = func(e *facade.EventRecord) error {
		if e.Deleted {
			return nil // a tombstone: the key has no value
		}
		return all(e)
	}
	if ti.stream.CachedInfo().Config.AllowDirect {
		err := b.multiLast(ctx, ti, []string{keyedWildcard(ti.topic)}, n, func(e *facade.EventRecord, _ string) error {
			return fn(e)
		})
		if !errors.Is(err, errTooManySubjects) {
			return err
		}
	}
	return b.latestByConsumer(ctx, ti, n, fn)
}

// latestByConsumer reads the last message per key subject up to sequence n
// with an ephemeral, ack-less consumer.
func (b *Bus) latestByConsumer(ctx context.Context, ti *topicInfo, n uint64, fn func(*facade.EventRecord) error) error {
	rctx, cancel := b.withTimeout(ctx)
	cons, err := ti.stream.CreateConsumer(rctx, jetstream.ConsumerConfig{
		Description:       "eventhub latest-per-key scan of " + ti.topic,
		DeliverPolicy:     jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		FilterSubject:     keyedWildcard(ti.topic),
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
		Replicas:          1,
	})
	cancel()
	if err != nil {
		return fmt.Errorf("scan %s: %w", ti.topic, translate(err))
	}
	defer func() {
		dctx, cancel := b.withTimeout(context.WithoutCancel(ctx))
		defer cancel()
		_ = ti.stream.DeleteConsumer(dctx, cons.CachedInfo().Name)
	}()
	var last uint64
	size := scanFirstBatch
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, err := cons.FetchNoWait(size)
		if err != nil {
			return fmt.Errorf("scan %s: %w", ti.topic, translate(err))
		}
		got, bytes, done := 0, 0, false
		for msg := range batch.Messages() {
			if done {
				continue // drain the batch
			}
			got++
			bytes += len(msg.Data()) + len(msg.Subject()) + 64
			meta, err := msg.Metadata()
			if err != nil {
				continue
			}
			seq := meta.Sequence.Stream
			if seq > n {
				done = true
				continue
			}
			if seq <= last {
				continue
			}
			last = seq
			if err := fn(fromMsg(msg.Subject(), msg.Headers(), msg.Data(), seq, meta.Timestamp)); err != nil {
				return err
			}
			if seq == n {
				done = true
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("scan %s: %w", ti.topic, translate(err))
		}
		if done || got == 0 {
			return nil
		}
		size = min(max(scanFetchBytes/max(bytes/got, 1), 16), scanMaxBatch)
	}
}

// TopicCompacted implements [facade.CompactionReporter]: whether the topic's
// stream keeps one message per subject (max_msgs_per_subject 1). The stream
// is created from the bus's topic configuration if it does not exist.
func (b *Bus) TopicCompacted(ctx context.Context, topic string) (bool, error) {
	ti, err := b.topic(ctx, topic)
	if err != nil {
		return false, err
	}
	return ti.compacted && ti.keyed, nil
}

// Batched direct gets.

// directGetRequest is the body of "$JS.API.DIRECT.GET.<stream>" (nats-server
// JSApiMsgGetRequest).
type directGetRequest struct {
	Seq       uint64   `json:"seq,omitempty"`
	Batch     int      `json:"batch,omitempty"`
	MaxBytes  int      `json:"max_bytes,omitempty"`
	MultiLast []string `json:"multi_last,omitempty"`
	UpToSeq   uint64   `json:"up_to_seq,omitempty"`
}

// directEnd is what the end-of-batch status (204 EOB) reports.
type directEnd struct {
	pending uint64 // messages of the request not sent (max_bytes reached)
	lastSeq uint64 // sequence of the last message sent
	upToSeq uint64 // the sequence the request was answered as of
}

var (
	errTooManySubjects = errors.New("multi_last matches more than 1024 subjects")
	errNoResults       = errors.New("no results")
)

// Header names of direct get responses (nats-server stream.go).
const (
	hdrSubject    = "Nats-Subject"
	hdrSequence   = "Nats-Sequence"
	hdrTimeStamp  = "Nats-Time-Stamp"
	hdrNumPending = "Nats-Num-Pending"
	hdrLastSeq    = "Nats-Last-Sequence"
	hdrUpToSeq    = "Nats-UpTo-Sequence"
	hdrStatus     = "Status"
	hdrDesc       = "Description"
)

// multiLast passes to fn the newest message of each subject matching
// filters, as of stream sequence upTo (0: the stream's last sequence when the
// server reads), with the stream's subject of each. It pages by sequence when
// a response is cut at directMaxBytes, keeping the first page's up_to_seq, so
// every page answers as of the same position.
func (b *Bus) multiLast(ctx context.Context, ti *topicInfo, filters []string, upTo uint64, fn func(e *facade.EventRecord, subject string) error) error {
	req := directGetRequest{MultiLast: filters, UpToSeq: upTo, MaxBytes: directMaxBytes}
	for {
		end, err := b.directGet(ctx, ti.name, req, func(m *nats.Msg) error {
			subj := m.Header.Get(hdrSubject)
			seq, err := strconv.ParseUint(m.Header.Get(hdrSequence), 10, 64)
			if err != nil {
				return fmt.Errorf("direct get %s: bad %s header", ti.name, hdrSequence)
			}
			ts, err := time.Parse(time.RFC3339Nano, m.Header.Get(hdrTimeStamp))
			if err != nil {
				return fmt.Errorf("direct get %s: bad %s header", ti.name, hdrTimeStamp)
			}
			return fn(fromMsg(subj, m.Header, m.Data, seq, ts), subj)
		})
		if errors.Is(err, errNoResults) {
			return nil
		}
		if err != nil {
			return err
		}
		if end.pending == 0 || end.lastSeq == 0 {
			return nil
		}
		req.Seq = end.lastSeq + 1
		req.UpToSeq = end.upToSeq
	}
}

// directGet sends one batched direct get request and passes each message of
// the response to fn, until the end-of-batch status. A ctx without deadline
// gets Config.RequestTimeout for each message awaited (not for the time fn
// takes).
func (b *Bus) directGet(ctx context.Context, stream string, req directGetRequest, fn func(*nats.Msg) error) (directEnd, error) {
	var end directEnd
	body, err := json.Marshal(req)
	if err != nil {
		return end, err
	}
	// A channel subscription sized for the whole response: a multi_last
	// response is at most 1024 messages and the end-of-batch status (nats.go's
	// SubscribeSync would allocate a 64k-slot channel per request).
	inbox := b.nc.NewInbox()
	ch := make(chan *nats.Msg, multiLastMaxSubjects+2)
	sub, err := b.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return end, fmt.Errorf("direct get %s: %w", stream, translate(err))
	}
	defer sub.Unsubscribe()
	if err := b.nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, body); err != nil {
		return end, fmt.Errorf("direct get %s: %w", stream, translate(err))
	}
	var timer *time.Timer
	var expired <-chan time.Time
	if _, ok := ctx.Deadline(); !ok {
		timer = time.NewTimer(b.cfg.RequestTimeout)
		defer timer.Stop()
		expired = timer.C
	}
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return end, fmt.Errorf("direct get %s: %w", stream, translate(ctx.Err()))
		case <-expired:
			return end, fmt.Errorf("direct get %s: %w: %w", stream, facade.ErrUnavailable, nats.ErrTimeout)
		}
		if timer != nil {
			timer.Reset(b.cfg.RequestTimeout)
		}
		if m.Header.Get(hdrSubject) != "" {
			if err := fn(m); err != nil {
				return end, err
			}
			continue
		}
		switch status := m.Header.Get(hdrStatus); status {
		case "204": // end of batch
			end.pending, _ = strconv.ParseUint(m.Header.Get(hdrNumPending), 10, 64)
			end.lastSeq, _ = strconv.ParseUint(m.Header.Get(hdrLastSeq), 10, 64)
			end.upToSeq, _ = strconv.ParseUint(m.Header.Get(hdrUpToSeq), 10, 64)
			return end, nil
		case "404":
			return end, errNoResults
		case "413":
			return end, errTooManySubjects
		case "503":
			return end, fmt.Errorf("direct get %s: %w: %w", stream, facade.ErrUnavailable, nats.ErrNoResponders)
		default:
			return end, fmt.Errorf("direct get %s: status %s %s", stream, status, m.Header.Get(hdrDesc))
		}
	}
}
