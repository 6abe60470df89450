package ops

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/inspect"
	"github.com/eventhub/eventhub/internal/eventjson"
)

// ExportStats reports what an export wrote.
type ExportStats struct {
	// FromSeq and ToSeq are the range the query resolved to, as stream
	// sequences, both inclusive; FromSeq > ToSeq for an empty range.
	FromSeq, ToSeq uint64
	// Events and Bytes count the lines written and their bytes.
	Events, Bytes int64
	// Scanned counts the events read: Events plus those that a
	// correlationId or tag filter left out (a key filter is applied by
	// the server, so its non-matching events are not read at all).
	Scanned int64
	// LastSeq is the sequence of the last event written (0: none); a
	// partial export resumes with from=seq:<LastSeq+1>.
	LastSeq uint64
}

// ExportOption configures one [Export] call.
type ExportOption func(*exportOptions) error

type exportOptions struct {
	flushEvery     int
	bufferBytes    int
	resolveTimeout time.Duration
}

// WithFlushEvery flushes the writer (if it has a Flush method) after every
// n lines (default 1000). The end of an export is always flushed.
func WithFlushEvery(n int) ExportOption {
	return func(o *exportOptions) error {
		if n <= 0 {
			return fmt.Errorf("%w: flush every %d lines", facade.ErrInvalidOption, n)
		}
		o.flushEvery = n
		return nil
	}
}

// WithBufferBytes sets about how many bytes of messages the export's
// consumer buffers (default 2 MiB): it buffers this many bytes' worth of
// messages of the stream's average size, at least 16 and at most 1000.
func WithBufferBytes(n int) ExportOption {
	return func(o *exportOptions) error {
		if n <= 0 {
			return fmt.Errorf("%w: buffer of %d bytes", facade.ErrInvalidOption, n)
		}
		o.bufferBytes = n
		return nil
	}
}

// Export writes the events of q to w as NDJSON: one event per line, each
// line the JSON of a [facade.EventRecord] (see docs/http-api.md), in stream
// order. It blocks until the range is written, ctx ends, or writing or
// reading fails, and returns what it wrote.
//
// The range is resolved once, at the start: To (or the stream's last
// sequence, if earlier or unset) is never passed, so an export of a topic
// being published to ends. The events are read by an ordered consumer
// from the first event of the range, so memory stays bounded (the
// consumer's buffer, see [WithBufferBytes], and a line buffer of about
// 64 KiB) however long the range. The
// consumer is deleted at the end.
//
// If w has a Flush() error or Flush() method (a *bufio.Writer, an
// http.ResponseWriter), it is called every WithFlushEvery lines and at the
// end. Errors wrap [facade.ErrNotFound] (no stream holds the topic),
// [facade.ErrUnknownID] (an id position that is not in the topic),
// [ErrBadRequest], [facade.ErrUnavailable], ctx's error, or w's error.
// Export is safe for concurrent use.
func Export(ctx context.Context, bus ExportSource, w io.Writer, q Query, opts ...ExportOption) (ExportStats, error) {
	o := exportOptions{flushEvery: DefaultFlushEvery, bufferBytes: DefaultReplayBufferBytes, resolveTimeout: DefaultRequestTimeout}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return ExportStats{}, err
		}
	}
	return export(ctx, bus, q, o, writerSink{w})
}

// ExportFile exports q (see [Export]) to the file at path, written to a
// temporary file in the same directory and renamed when complete, so that
// path never holds a partial export.
func ExportFile(ctx context.Context, bus ExportSource, path string, q Query, opts ...ExportOption) (ExportStats, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return ExportStats{}, fmt.Errorf("export: %w", err)
	}
	tmp := f.Name()
	bw := bufio.NewWriterSize(f, 256<<10)
	st, err := Export(ctx, bus, bw, q, opts...)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return st, fmt.Errorf("export %s: %w", q.Topic, err)
	}
	return st, nil
}

// sink is where export writes: a plain writer, or an HTTP response that
// needs headers before the first byte and deadlines per write.
type sink interface {
	// begin is called once the range is resolved, before any event.
	begin(st *ExportStats) error
	write(p []byte) error
	flush() error
}

type writerSink struct{ w io.Writer }

func (s writerSink) begin(*ExportStats) error { return nil }

func (s writerSink) write(p []byte) error {
	_, err := s.w.Write(p)
	return err
}

func (s writerSink) flush() error {
	switch f := s.w.(type) {
	case interface{ Flush() error }:
		return f.Flush()
	case http.Flusher:
		f.Flush()
	}
	return nil
}

const (
	// lineBuffer is how many bytes of lines are gathered before a write.
	lineBuffer = 32 << 10
	// stallWait is how long export waits for the next message before it
	// checks whether events of the range are still there (they can vanish
	// under it: retention limits, deletes).
	stallWait = 2 * time.Second
)

// export is Export with its options resolved, writing to out.
func export(ctx context.Context, bus ExportSource, q Query, o exportOptions, out sink) (ExportStats, error) {
	var st ExportStats
	if q.Limit < 0 {
		return st, fmt.Errorf("%w: negative limit %d", ErrBadRequest, q.Limit)
	}
	rctx, cancel := context.WithTimeout(ctx, o.resolveTimeout)
	ti, from, to, avgSize, err := resolveRange(rctx, bus, q)
	cancel()
	if err != nil {
		return st, err
	}
	st.FromSeq, st.ToSeq = from, to
	if err := out.begin(&st); err != nil {
		return st, err
	}
	if from > to {
		return st, out.flush()
	}
	buf := make([]byte, 0, 2*lineBuffer)
	sinceFlush := 0
	filtered := q.filtered()
	rr := inspect.ReplayRange{Key: q.Key, From: from, To: to, Batch: batchFor(o.bufferBytes, avgSize), StallWait: stallWait}
	err = bus.Replay(ctx, ti.Topic, rr, func(se *inspect.StoredEvent) (bool, error) {
		e := se.Event
		st.Scanned++
		if !filtered || q.match(e) {
			buf = eventjson.Append(buf, e)
			buf = append(buf, '\n')
			st.Events++
			st.LastSeq = e.Seq
			sinceFlush++
		}
		if q.Limit > 0 && st.Events >= q.Limit {
			return false, nil
		}
		if sinceFlush >= o.flushEvery || len(buf) >= lineBuffer {
			if err := out.write(buf); err != nil {
				return false, err
			}
			st.Bytes += int64(len(buf))
			buf = buf[:0]
			if sinceFlush >= o.flushEvery {
				if err := out.flush(); err != nil {
					return false, err
				}
				sinceFlush = 0
			}
		}
		return true, nil
	})
	if err != nil {
		return st, err
	}
	if len(buf) > 0 {
		if err := out.write(buf); err != nil {
			return st, err
		}
		st.Bytes += int64(len(buf))
	}
	return st, out.flush()
}

// Bounds of the messages an export's consumer buffers.
const (
	minBatch = 16
	maxBatch = 1000
)

// batchFor is how many messages an export's consumer buffers: about
// bufferBytes of messages of the stream's average size, between minBatch
// and maxBatch. The bound is a count of messages: nats.go's byte-bounded
// pulls either allocate a channel of a million slots (PullMaxBytes) or,
// in v1.55, can drop messages as a slow consumer when the reader is slower
// than the server (PullMaxMessagesWithBytesLimit).
func batchFor(bufferBytes int, avgSize uint64) int {
	if avgSize == 0 {
		return maxBatch
	}
	return int(min(max(uint64(bufferBytes)/avgSize, minBatch), maxBatch))
}

// resolveRange turns the query's positions into stream sequences: from is
// the first sequence to read, to the last (both inclusive). It reads the
// stream's info once (which also gives the average message size) and
// resolves each position with at most a few message lookups.
func resolveRange(ctx context.Context, bus ExportSource, q Query) (ti *inspect.Topic, from, to, avgSize uint64, err error) {
	if err := facade.ValidateTopic(q.Topic); err != nil {
		return nil, 0, 0, 0, err
	}
	ti, err = bus.Topic(ctx, q.Topic)
	if errors.Is(err, facade.ErrNotFound) {
		return nil, 0, 0, 0, fmt.Errorf("%w: no stream holds topic %s", facade.ErrNotFound, q.Topic)
	}
	if err != nil {
		return nil, 0, 0, 0, err
	}
	state, err := bus.StreamState(ctx, q.Topic)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	last := state.LastSeq
	if q.Key != "" && !ti.Keyed {
		// The key is in the subject, so the server picks the key's
		// messages; a stream without keyed subjects has no keyed events.
		return ti, 1, 0, avgSize, nil
	}
	if state.Messages > 0 {
		avgSize = state.Bytes / state.Messages
	}
	to = last
	switch q.To.Kind {
	case PosEarliest:
		to = 0
	case PosSeq:
		to = min(q.To.Seq, last)
	case PosID:
		s, err := bus.SeqOfID(ctx, q.Topic, q.To.ID)
		if err != nil {
			return nil, 0, 0, 0, fmt.Errorf("to: %w", err)
		}
		to = min(s, last)
	case PosTime:
		s, err := bus.SeqAtTime(ctx, q.Topic, q.To.Time)
		if err != nil {
			return nil, 0, 0, 0, fmt.Errorf("to: %w", err)
		}
		to = min(max(s, 1)-1, last) // exclusive: the last event stored before the time
	}
	from = 1
	switch q.From.Kind {
	case PosLatest:
		from = last + 1
	case PosSeq:
		from = q.From.Seq
	case PosID:
		if from, err = bus.SeqOfID(ctx, q.Topic, q.From.ID); err != nil {
			return nil, 0, 0, 0, fmt.Errorf("from: %w", err)
		}
	case PosTime:
		if from, err = bus.SeqAtTime(ctx, q.Topic, q.From.Time); err != nil {
			return nil, 0, 0, 0, fmt.Errorf("from: %w", err)
		}
	}
	if from > to {
		return ti, from, to, avgSize, nil
	}
	// Start at the topic's first event in the range (there may be none: a
	// shared stream, deleted or compacted messages), which also spares
	// creating a consumer for an empty range.
	first, ok, err := bus.NextSeq(ctx, q.Topic, q.Key, from)
	switch {
	case err != nil:
		return nil, 0, 0, 0, err
	case !ok:
		return ti, from, min(to, from-1), avgSize, nil
	case first > to:
		return ti, from, from - 1, avgSize, nil
	}
	return ti, first, to, avgSize, nil
}

// httpSink writes a replay to an HTTP response.
type httpSink struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	started bool
	// writeErr is the first error writing to the client: the client
	// went away or stopped reading.
	writeErr error
}

func (s *httpSink) begin(st *ExportStats) error {
	hd := s.w.Header()
	hd.Set("Content-Type", "application/x-ndjson")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Eventhub-Replay-From-Seq", strconv.FormatUint(st.FromSeq, 10))
	hd.Set("Eventhub-Replay-To-Seq", strconv.FormatUint(st.ToSeq, 10))
	s.started = true
	s.deadline()
	s.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *httpSink) write(p []byte) error {
	s.deadline()
	if _, err := s.w.Write(p); err != nil {
		s.writeErr = cmp.Or(s.writeErr, err)
		return err
	}
	return nil
}

func (s *httpSink) flush() error {
	s.deadline()
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.writeErr = cmp.Or(s.writeErr, err)
		return err
	}
	return nil
}

// deadline moves the connection's write deadline to timeout from now, so
// a client that stops reading is dropped, and a long replay is not cut by
// the server's WriteTimeout.
func (s *httpSink) deadline() {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
}

// replay streams a range of a topic as NDJSON (see [Export]).
func (h *Handler) replay(w http.ResponseWriter, r *http.Request) error {
	q, err := ParseQuery(r.URL.Query())
	if err != nil {
		return err
	}
	select {
	case h.replays <- struct{}{}:
		defer func() { <-h.replays }()
	default:
		return fmt.Errorf("%w: %d running, try again later", ErrTooManyRequests, cap(h.replays))
	}
	out := &httpSink{w: w, rc: http.NewResponseController(w), timeout: h.cfg.ReplayWriteTimeout}
	o := exportOptions{flushEvery: h.cfg.FlushEvery, bufferBytes: h.cfg.ReplayBufferBytes, resolveTimeout: h.cfg.RequestTimeout}
	start := time.Now()
	st, err := export(r.Context(), h.export, q, o, out)
	log := h.log.With("topic", q.Topic, "from_seq", st.FromSeq, "to_seq", st.ToSeq,
		"events", st.Events, "scanned", st.Scanned, "bytes", st.Bytes, "last_seq", st.LastSeq, "duration", time.Since(start))
	switch {
	case err == nil:
		log.Debug("replay done")
	case !out.started:
		return err
	case r.Context().Err() != nil || out.writeErr != nil:
		log.Debug("replay ended by the client", "err", err)
	default:
		// The status is sent: end the response without its final chunk,
		// so the client sees a truncated transfer, not a complete range.
		log.Warn("replay failed", "err", err)
		panic(http.ErrAbortHandler)
	}
	return nil
}
