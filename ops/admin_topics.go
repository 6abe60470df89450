package ops

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/inspect"
)

type adminTopicJSON struct {
	Topic     string     `json:"topic"`
	Stream    streamJSON `json:"stream"`
	Filters   []string   `json:"filters"`
	Keyed     bool       `json:"keyed"`
	Compacted bool       `json:"compacted"`
	// Shared: the stream holds other topics too, or was made outside the
	// hub; the admin API does not change or delete it.
	Shared bool `json:"shared"`
	// DeadLetterTopic and DeadLetters: the topic's dead-letter topic and
	// how many dead letters it holds (0 when it does not exist).
	DeadLetterTopic string `json:"deadLetterTopic"`
	DeadLetters     uint64 `json:"deadLetters"`
}

// adminDescribeTopic describes the stream of ?topic=.
func (h *Handler) adminDescribeTopic(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	ti, err := h.lookupTopic(ctx, r)
	if err != nil {
		return err
	}
	out, err := h.describeTopic(ctx, ti)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *Handler) describeTopic(ctx context.Context, ti *inspect.Topic) (adminTopicJSON, error) {
	sd, err := h.topics.DescribeStream(ctx, ti.Topic)
	if err != nil {
		return adminTopicJSON{}, err
	}
	out := adminTopicJSON{
		Topic: ti.Topic, Stream: streamOf(sd), Filters: ti.Filters, Keyed: ti.Keyed, Compacted: ti.Compacted,
		Shared: ti.Shared, DeadLetterTopic: facade.DeadLetterTopic(ti.Topic),
	}
	n, err := h.topics.TopicCount(ctx, out.DeadLetterTopic)
	if err != nil && !errors.Is(err, facade.ErrNotFound) {
		return out, err
	}
	out.DeadLetters = n
	return out, nil
}

// adminDeclareTopic creates a topic's stream, or changes the settings
// given of the hub's own stream of it: ?compaction=true|false,
// ?maxAge=<duration>, ?retentionDays=<n>, ?maxBytes=<n>,
// ?duplicateWindow=<duration>, and, on create, ?storage=file|memory and
// ?replicas=1|3|5. 201 when created, 200 when it existed.
func (h *Handler) adminDeclareTopic(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	topic, err := param(r, "topic")
	if err != nil {
		return err
	}
	q := r.URL.Query()
	tc := inspect.TopicSettings{Topic: topic}
	// Start from the existing stream's settings, so that a declare changes
	// only what it names.
	if ti, err := h.topics.Topic(ctx, topic); err == nil {
		tc.MaxAge, tc.Compaction, tc.DuplicateWindow, tc.MaxBytes = ti.MaxAge, ti.Compacted, ti.DuplicateWindow, ti.MaxBytes
	}
	if q.Has("compaction") {
		if tc.Compaction, err = boolParam(r, "compaction"); err != nil {
			return err
		}
	}
	for name, dst := range map[string]*time.Duration{"maxAge": &tc.MaxAge, "duplicateWindow": &tc.DuplicateWindow} {
		if s := q.Get(name); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 {
				return fmt.Errorf("%w: %s %q: want a duration such as 24h (0: unlimited)", ErrBadRequest, name, s)
			}
			*dst = d
		}
	}
	if s := q.Get("retentionDays"); s != "" {
		d, err := strconv.ParseFloat(s, 64)
		// !(d <= max) refuses NaN too; a century is far beyond any
		// retention and well within time.Duration.
		if err != nil || d < 0 || !(d <= 36500) {
			return fmt.Errorf("%w: retentionDays %q: want a number from 0 to 36500", ErrBadRequest, s)
		}
		tc.MaxAge = time.Duration(d * float64(24*time.Hour))
	}
	n, err := intParam(r, "maxBytes", tc.MaxBytes, 0, 1<<62)
	if err != nil {
		return err
	}
	tc.MaxBytes = n
	tc.Storage = q.Get("storage")
	rep, err := intParam(r, "replicas", 0, 0, 5)
	if err != nil {
		return err
	}
	tc.Replicas = int(rep)
	name, created, err := h.topics.DeclareTopicSettings(ctx, tc)
	if err != nil {
		return err
	}
	ti, err := h.topics.Topic(ctx, topic)
	if err != nil {
		return err
	}
	out, err := h.describeTopic(ctx, ti)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, map[string]any{"created": created, "stream": name, "topic": out})
	return nil
}

// adminPurge removes events of ?topic=: all of them, those up to and
// including ?upTo=<position>, or, with ?key=, every event of one key
// (compacted and keyed topics). Groups keep their cursors.
func (h *Handler) adminPurge(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	ti, err := h.lookupTopic(ctx, r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	key := q.Get("key")
	if q.Has("key") {
		if key == "" {
			return fmt.Errorf("%w: key must not be empty", facade.ErrBadKey)
		}
		if !ti.Keyed {
			return fmt.Errorf("%w: the stream of %s does not capture keys", facade.ErrBadKey, ti.Topic)
		}
	}
	var upTo uint64
	if s := q.Get("upTo"); s != "" {
		pos, err := ParsePosition(s)
		if err != nil {
			return fmt.Errorf("upTo: %w", err)
		}
		switch pos.Kind {
		case PosSeq:
			upTo = pos.Seq
		case PosID:
			upTo, err = h.events.SeqOfID(ctx, ti.Topic, pos.ID)
		case PosTime: // events stored before the time
			upTo, err = h.events.SeqAtTime(ctx, ti.Topic, pos.Time)
			upTo = max(upTo, 1) - 1
		case PosLatest:
			var st inspect.StreamState
			st, err = h.topics.StreamState(ctx, ti.Topic)
			upTo = st.LastSeq
		default:
			upTo = 0
		}
		if err != nil {
			return fmt.Errorf("upTo: %w", err)
		}
		if upTo == 0 {
			writeJSON(w, http.StatusOK, map[string]any{"topic": ti.Topic, "purged": 0})
			return nil
		}
	}
	purged, err := h.topics.Purge(ctx, ti.Topic, key, upTo)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"topic": ti.Topic, "purged": purged})
	return nil
}

// adminDeleteTopic deletes the hub's own stream of ?topic= with its events
// and groups.
func (h *Handler) adminDeleteTopic(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	topic, err := param(r, "topic")
	if err != nil {
		return err
	}
	if err := h.topics.DeleteTopic(ctx, topic); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"topic": topic, "deleted": true})
	return nil
}
