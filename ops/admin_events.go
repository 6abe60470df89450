package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/inspect"
	"github.com/eventhub/eventhub/internal/eventjson"
	"github.com/eventhub/eventhub/internal/hashid"
)

// storedEventJSON is one stored message: the event as subscribers get it,
// and what the stream holds around it.
type storedEventJSON struct {
	Event    json.RawMessage     `json:"event"`
	Subject  string              `json:"subject"`
	StoredTS int64               `json:"storedTs"`
	Headers  map[string][]string `json:"headers"`
}

func storedEvent(se *inspect.StoredEvent) storedEventJSON {
	h := se.Headers
	if h == nil {
		h = map[string][]string{}
	}
	return storedEventJSON{Event: eventjson.Append(nil, se.Event), Subject: se.Subject, StoredTS: se.Stored.UnixMilli(), Headers: h}
}

// adminEvent answers one event of ?topic= by ?seq= or ?id=, with the
// message's headers.
func (h *Handler) adminEvent(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	ti, err := h.lookupTopic(ctx, r)
	if err != nil {
		return err
	}
	seq, err := seqParam(r, "seq")
	if err != nil {
		return err
	}
	if id := r.URL.Query().Get("id"); seq == 0 && id != "" {
		if seq, err = h.events.SeqOfID(ctx, ti.Topic, id); err != nil {
			return err
		}
	}
	if seq == 0 {
		return fmt.Errorf("%w: query parameter seq or id is required", ErrBadRequest)
	}
	se, err := h.events.Event(ctx, ti.Topic, seq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, storedEvent(se))
	return nil
}

type browseJSON struct {
	Topic  string            `json:"topic"`
	Events []storedEventJSON `json:"events"`
	// Next is the sequence to browse on from (?from=seq:<next>); End: the
	// range holds no more events.
	Next uint64 `json:"next"`
	End  bool   `json:"end"`
}

// adminBrowse answers a page of ?topic= from ?from= to ?to= (positions as
// replay takes them), at most ?limit= events (default 50, at most 500),
// filtered by ?key=, ?tag= and ?causedBy= (an id the event was caused
// by). A page reads at most 10000 messages, so a rare match may need
// several pages; it never reads the whole stream at once.
func (h *Handler) adminBrowse(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	q, err := ParseQuery(r.URL.Query())
	if err != nil {
		return err
	}
	q.Limit = 0
	limit, err := intParam(r, "limit", defaultPage, 1, maxPage)
	if err != nil {
		return err
	}
	ti, from, to, _, err := resolveRange(ctx, h.export, q)
	if err != nil {
		return err
	}
	v := r.URL.Query()
	key := v.Get("key")
	noKey := v.Has("key") && (key == "" || !ti.Keyed) // no event has this key
	tag, causedBy := v.Get("tag"), v.Get("causedBy")
	out := browseJSON{Topic: ti.Topic, Events: []storedEventJSON{}, Next: from}
	if from > to || noKey {
		out.End, out.Next = true, max(from, to+1)
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	next, end, err := h.events.Scan(ctx, ti.Topic, inspect.Scan{Key: key, From: from, Max: maxScan}, func(se *inspect.StoredEvent) bool {
		e := se.Event
		if e.Seq > to {
			return false
		}
		if (tag == "" || slices.Contains(e.Tags, tag)) && (causedBy == "" || slices.Contains(e.CausedBy, causedBy)) {
			out.Events = append(out.Events, storedEvent(se))
		}
		return len(out.Events) < int(limit) && e.Seq < to
	})
	if err != nil {
		return err
	}
	out.Next = next
	out.End = end || next > to
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deadLetterJSON is one dead letter: where it is in <topic>.dlq, the event
// it holds, and why it is there.
type deadLetterJSON struct {
	Seq      uint64 `json:"seq"`
	ID       string `json:"id"`
	Topic    string `json:"topic"`
	Group    string `json:"group"`
	EventID  string `json:"eventId"`
	EventSeq uint64 `json:"eventSeq"`
	Attempts int    `json:"attempts"`
	Reason   string `json:"reason"`
	StoredTS int64  `json:"storedTs"`
	// Event is the dead letter as stored (its headers include dlq_*).
	Event json.RawMessage `json:"event"`
}

func deadLetterOf(e *facade.EventRecord, topic string, storedMs int64) deadLetterJSON {
	d := deadLetterJSON{
		Seq: e.Seq, ID: e.ID, Topic: e.Headers["dlq_topic"], Group: e.Headers["dlq_group"],
		EventID: e.Headers["dlq_id"], Reason: e.Headers["dlq_reason"], StoredTS: storedMs,
		Event: eventjson.Append(nil, e),
	}
	if d.Topic == "" {
		d.Topic = topic
	}
	d.EventSeq, _ = strconv.ParseUint(e.Headers["dlq_seq"], 10, 64)
	d.Attempts, _ = strconv.Atoi(e.Headers["dlq_attempts"])
	return d
}

type deadLettersJSON struct {
	Topic           string           `json:"topic"`
	DeadLetterTopic string           `json:"deadLetterTopic"`
	DeadLetters     []deadLetterJSON `json:"deadLetters"`
	// Next is the ?after= of the next page; End: no more dead letters.
	Next uint64 `json:"next"`
	End  bool   `json:"end"`
}

// deadLetterTopic looks up <topic>.dlq; ErrNotFound when it does not exist.
func (h *Handler) deadLetterTopic(ctx context.Context, r *http.Request) (string, *inspect.Topic, error) {
	topic, err := param(r, "topic")
	if err != nil {
		return "", nil, err
	}
	if strings.HasSuffix(topic, "."+facade.DeadLetterSuffix) {
		topic = strings.TrimSuffix(topic, "."+facade.DeadLetterSuffix) // either name works
	}
	dlq := facade.DeadLetterTopic(topic)
	ti, err := h.topics.Topic(ctx, dlq)
	if errors.Is(err, facade.ErrNotFound) {
		return topic, nil, fmt.Errorf("%w: topic %s has no dead letters (%s does not exist)", facade.ErrNotFound, topic, dlq)
	}
	return topic, ti, err
}

// adminDeadLetters lists the dead letters of ?topic= after ?after= (a
// sequence of the dead-letter topic), ?limit= at a time.
func (h *Handler) adminDeadLetters(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	topic, ti, err := h.deadLetterTopic(ctx, r)
	if errors.Is(err, facade.ErrNotFound) && ti == nil && topic != "" {
		writeJSON(w, http.StatusOK, deadLettersJSON{Topic: topic, DeadLetterTopic: facade.DeadLetterTopic(topic),
			DeadLetters: []deadLetterJSON{}, End: true})
		return nil
	}
	if err != nil {
		return err
	}
	after, err := intParam(r, "after", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", defaultPage, 1, maxPage)
	if err != nil {
		return err
	}
	out := deadLettersJSON{Topic: topic, DeadLetterTopic: ti.Topic, DeadLetters: []deadLetterJSON{}}
	next, end, err := h.events.Scan(ctx, ti.Topic, inspect.Scan{From: uint64(after) + 1, Max: int(limit)}, func(se *inspect.StoredEvent) bool {
		out.DeadLetters = append(out.DeadLetters, deadLetterOf(se.Event, topic, se.Stored.UnixMilli()))
		return true
	})
	if err != nil {
		return err
	}
	out.Next, out.End = next-1, end
	writeJSON(w, http.StatusOK, out)
	return nil
}

// RedriveKey is the Nats-Msg-Id of the event a redrive of dead letter
// deadLetterID publishes: the same dead letter redriven twice (within the
// topic's duplicate window) is stored once. The redriven event's id is a
// fresh uuidv7, a position in the topic like every id the hub makes.
func RedriveKey(deadLetterID string) string {
	return hashid.V8("redrive", deadLetterID)
}

// selection reads which dead letters an action takes: ?seq=<n>, a range
// ?from=<n>&to=<n> (inclusive), or ?all=true.
func selection(r *http.Request) (from, to uint64, single bool, err error) {
	seq, err := seqParam(r, "seq")
	if err != nil {
		return 0, 0, false, err
	}
	if seq > 0 {
		return seq, seq, true, nil
	}
	if from, err = seqParam(r, "from"); err != nil {
		return 0, 0, false, err
	}
	if to, err = seqParam(r, "to"); err != nil {
		return 0, 0, false, err
	}
	all, err := boolParam(r, "all")
	if err != nil {
		return 0, 0, false, err
	}
	if !all && from == 0 && to == 0 {
		return 0, 0, false, fmt.Errorf("%w: name the dead letters: seq=<n>, from=<n>&to=<n>, or all=true", ErrBadRequest)
	}
	if from == 0 {
		from = 1
	}
	if to == 0 {
		to = 1<<63 - 1
	}
	if from > to {
		return 0, 0, false, fmt.Errorf("%w: from %d is after to %d", ErrBadRequest, from, to)
	}
	return from, to, false, nil
}

type redrivenJSON struct {
	DeadLetterSeq uint64 `json:"deadLetterSeq"`
	DeadLetterID  string `json:"deadLetterId"`
	// ID and Seq: the event published to the original topic.
	ID  string `json:"id"`
	Seq uint64 `json:"seq"`
}

// adminRedrive publishes dead letters back to their original topic and
// removes them from <topic>.dlq (?keep=true leaves them). Each redriven
// event gets a fresh uuidv7 id, the Nats-Msg-Id [RedriveKey] of its dead
// letter, the original event's
// headers (without dlq_*), key, tags and sid, and caused_by the original
// event's id: redriving the same dead letter again within the duplicate
// window stores nothing new. Every group of the topic gets the event.
func (h *Handler) adminRedrive(w http.ResponseWriter, r *http.Request) error {
	return h.deadLetterAction(w, r, "redriven", func(ctx context.Context, topic string, e *facade.EventRecord) (*redrivenJSON, error) {
		headers := make(map[string]string, len(e.Headers))
		for k, v := range e.Headers {
			if !strings.HasPrefix(k, "dlq_") {
				headers[k] = v
			}
		}
		orig := e.Headers["dlq_id"]
		headers["redriven_from"] = e.ID
		// Always the topic the dead-letter topic belongs to, whatever the
		// dead letter's headers say: anyone who may publish to <topic>.dlq
		// could write a dlq_topic header naming a topic they may not
		// publish to, and the redrive would publish there for them.
		to := topic
		rec, err := h.events.PublishDerived(ctx, to, e.Payload, facade.PublishOptions{
			Key: e.Key, Partition: e.Partition, Headers: headers,
			Tags: e.Tags, CausedBy: nonEmpty(orig), SID: e.SID,
		}, RedriveKey(e.ID))
		if err != nil {
			return nil, fmt.Errorf("redrive dead letter %d to %s: %w", e.Seq, to, err)
		}
		return &redrivenJSON{DeadLetterSeq: e.Seq, DeadLetterID: e.ID, ID: rec.ID, Seq: rec.Seq}, nil
	})
}

// adminDiscard deletes dead letters from <topic>.dlq.
func (h *Handler) adminDiscard(w http.ResponseWriter, r *http.Request) error {
	return h.deadLetterAction(w, r, "discarded", nil)
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// deadLetterAction runs fn (nil: nothing) on each selected dead letter, in
// order, then deletes it from the dead-letter topic unless ?keep=true (a
// discard always deletes). It handles at most 1000 dead letters per call;
// the answer's next and end say whether more are left.
func (h *Handler) deadLetterAction(w http.ResponseWriter, r *http.Request, verb string,
	fn func(ctx context.Context, topic string, e *facade.EventRecord) (*redrivenJSON, error)) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	topic, ti, err := h.deadLetterTopic(ctx, r)
	if err != nil {
		return err
	}
	from, to, single, err := selection(r)
	if err != nil {
		return err
	}
	keep := false
	if fn != nil {
		if keep, err = boolParam(r, "keep"); err != nil {
			return err
		}
	}
	var done []*redrivenJSON
	count := 0
	var actErr error
	next, end, err := h.events.Scan(ctx, ti.Topic, inspect.Scan{From: from, Max: maxBatchAction}, func(se *inspect.StoredEvent) bool {
		e := se.Event
		seq := e.Seq
		if seq > to {
			return false
		}
		if fn != nil {
			d, err := fn(ctx, topic, e)
			if err != nil {
				actErr = err
				return false
			}
			done = append(done, d)
		}
		if !keep {
			if err := h.events.DeleteEvent(ctx, ti.Topic, seq); err != nil && !errors.Is(err, facade.ErrNotFound) {
				actErr = fmt.Errorf("delete dead letter %d: %w", seq, err)
				return false
			}
		}
		count++
		return seq < to
	})
	if err == nil {
		err = actErr
	}
	if err != nil {
		return err
	}
	if single && count == 0 {
		return fmt.Errorf("%w: %s has no dead letter at %d", facade.ErrNotFound, ti.Topic, from)
	}
	out := map[string]any{"topic": topic, "deadLetterTopic": ti.Topic, verb: count,
		"next": next, "end": end || next > to}
	if fn != nil {
		if done == nil {
			done = []*redrivenJSON{}
		}
		out["events"] = done
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
