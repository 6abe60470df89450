package ops

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/inspect"
	"github.com/eventhub/eventhub/internal/eventjson"
)

// healthz answers 200 while the process serves HTTP.
func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

type readyJSON struct {
	Status     string       `json:"status"`
	Durability string       `json:"durability,omitempty"`
	Error      *errorDetail `json:"error,omitempty"`
}

// readyz answers 200 when JetStream answers within ReadyTimeout, else 503.
func (h *Handler) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.ReadyTimeout)
	defer cancel()
	var err error
	if h.status.Closed() {
		err = facade.ErrClosed
	} else {
		err = h.status.Ready(ctx)
	}
	if err != nil {
		code, msg := wireError(err)
		writeJSON(w, http.StatusServiceUnavailable, readyJSON{
			Status: "unavailable", Durability: h.cfg.Durability,
			Error: &errorDetail{Code: code, Msg: msg},
		})
		return nil
	}
	writeJSON(w, http.StatusOK, readyJSON{Status: "ready", Durability: h.cfg.Durability})
	return nil
}

// param returns a required query parameter, or an ErrBadRequest naming it.
func param(r *http.Request, name string) (string, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return "", fmt.Errorf("%w: query parameter %q is required", ErrBadRequest, name)
	}
	return v, nil
}

// lookupTopic finds the stream of the topic named by the query.
func (h *Handler) lookupTopic(ctx context.Context, r *http.Request) (*inspect.Topic, error) {
	return h.lookup(ctx, r, false)
}

// lookupGroupTopic finds the stream of what a group reads, named by the
// query: a topic, or a pattern over a topic family.
func (h *Handler) lookupGroupTopic(ctx context.Context, r *http.Request) (*inspect.Topic, error) {
	return h.lookup(ctx, r, true)
}

func (h *Handler) lookup(ctx context.Context, r *http.Request, pattern bool) (*inspect.Topic, error) {
	topic, err := param(r, "topic")
	if err != nil {
		return nil, err
	}
	if err := validTopic(topic, pattern); err != nil {
		return nil, err
	}
	ti, err := h.topics.Topic(ctx, topic)
	if errors.Is(err, facade.ErrNotFound) {
		return nil, fmt.Errorf("%w: no stream holds topic %s", facade.ErrNotFound, topic)
	}
	return ti, err
}

// cursorJSON is one group's position in a topic, from its consumer's info.
type cursorJSON struct {
	Group    string `json:"group"`
	Consumer string `json:"consumer"`
	// LastID, LastTS and LastSeq: the ack floor (every event up to it is
	// acknowledged); LastID and LastTS are empty when nothing is acked or
	// the event is gone.
	LastID  string `json:"lastId,omitempty"`
	LastTS  int64  `json:"lastTs,omitempty"`
	LastSeq uint64 `json:"lastSeq"`
	// DeliveredSeq is the stream sequence last delivered.
	DeliveredSeq uint64 `json:"deliveredSeq"`
	// Pending: events not yet delivered; AckPending: delivered, not yet
	// acknowledged; Lag = Pending + AckPending.
	Pending     uint64 `json:"pending"`
	AckPending  int    `json:"ackPending"`
	Lag         uint64 `json:"lag"`
	Redelivered int    `json:"redelivered"`
	Waiting     int    `json:"waiting"`
	Paused      bool   `json:"paused,omitempty"`
	// LastActiveTs is when the group last had an event delivered (epoch ms).
	LastActiveTS int64 `json:"lastActiveTs,omitempty"`
}

type cursorsJSON struct {
	Topic   string       `json:"topic"`
	Stream  string       `json:"stream"`
	Cursors []cursorJSON `json:"cursors"`
}

// cursors lists every group of a topic with its cursor and counts.
func (h *Handler) cursors(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	ti, err := h.lookupGroupTopic(ctx, r)
	if err != nil {
		return err
	}
	groups, err := h.groups.Groups(ctx, ti.Topic)
	if err != nil {
		return err
	}
	out := cursorsJSON{Topic: ti.Topic, Stream: ti.StreamName, Cursors: []cursorJSON{}}
	for i := range groups {
		out.Cursors = append(out.Cursors, cursorOf(&groups[i]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func cursorOf(g *inspect.GroupInfo) cursorJSON {
	return cursorJSON{
		Group:        g.Group,
		Consumer:     g.Consumer,
		LastID:       g.Cursor.LastID,
		LastTS:       g.Cursor.LastTS,
		LastSeq:      g.Cursor.LastSeq,
		DeliveredSeq: g.DeliveredSeq,
		Pending:      g.Pending,
		AckPending:   g.AckPending,
		Lag:          g.Lag,
		Redelivered:  g.Redelivered,
		Waiting:      g.Waiting,
		Paused:       g.Paused,
		LastActiveTS: msTime(g.LastActive),
	}
}

type positionJSON struct {
	Seq uint64 `json:"seq"`
	ID  string `json:"id,omitempty"`
	// TS is the event's ts; StoredTs the time the stream stored it (epoch ms).
	TS       int64 `json:"ts,omitempty"`
	StoredTS int64 `json:"storedTs,omitempty"`
}

type lagJSON struct {
	Topic    string `json:"topic"`
	Group    string `json:"group"`
	Stream   string `json:"stream"`
	Consumer string `json:"consumer"`
	// Lag counts the events not yet acknowledged: Pending (not delivered)
	// + AckPending (delivered, unacknowledged).
	Lag        uint64 `json:"lag"`
	Pending    uint64 `json:"pending"`
	AckPending int    `json:"ackPending"`
	// LagMs is now minus the stored time of Oldest; 0 when Lag is 0, null
	// when the oldest event could not be read.
	LagMs *int64 `json:"lagMs"`
	// Oldest is the oldest event not yet acknowledged: the topic's first
	// event after the cursor.
	Oldest *positionJSON `json:"oldest"`
	// Cursor is the group's ack floor.
	Cursor facade.CursorPosition `json:"cursor"`
	// StreamLastSeq and StreamLastTs: the stream's tail.
	StreamLastSeq uint64 `json:"streamLastSeq"`
	StreamLastTS  int64  `json:"streamLastTs,omitempty"`
}

// lag answers a group's lag in events and in time, from its consumer's
// state and single message lookups.
func (h *Handler) lag(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	ti, err := h.lookupGroupTopic(ctx, r)
	if err != nil {
		return err
	}
	group, err := param(r, "group")
	if err == nil {
		err = facade.ValidateGroup(group)
	}
	if err != nil {
		return err
	}
	gl, err := h.groups.GroupLag(ctx, ti.Topic, group)
	if err != nil {
		return err
	}
	out := lagJSON{
		Topic: ti.Topic, Group: group, Stream: ti.StreamName, Consumer: gl.Consumer,
		Pending:       gl.Pending,
		AckPending:    gl.AckPending,
		Lag:           gl.Lag,
		Cursor:        gl.Cursor,
		StreamLastSeq: gl.StreamLastSeq,
		StreamLastTS:  msTime(gl.StreamLastTime),
	}
	if out.Lag == 0 {
		out.LagMs = new(int64)
	} else if e := gl.Oldest; e != nil {
		out.Oldest = &positionJSON{Seq: e.Seq, ID: e.ID, TS: e.TS, StoredTS: gl.OldestStored.UnixMilli()}
		ms := max(h.cfg.Now().Sub(gl.OldestStored).Milliseconds(), 0)
		out.LagMs = &ms
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// latestByKey answers the newest event of one key of a topic.
func (h *Handler) latestByKey(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	topic, err := param(r, "topic")
	if err != nil {
		return err
	}
	if _, ok := r.URL.Query()["key"]; !ok {
		return fmt.Errorf("%w: query parameter %q is required", ErrBadRequest, "key")
	}
	key := r.URL.Query().Get("key")
	if key == "" {
		return fmt.Errorf("%w: key must not be empty", ErrBadRequest)
	}
	var kr facade.KeyReader = h.events
	got, err := kr.LatestByKey(ctx, topic, []string{key})
	if err != nil {
		return err
	}
	e, ok := got[key]
	if !ok {
		return fmt.Errorf("%w: topic %s has no event with key %q", facade.ErrNotFound, topic, key)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(eventjson.Append(nil, e), '\n'))
	return nil
}

type streamGroupJSON struct {
	Group    string `json:"group"`
	Topic    string `json:"topic,omitempty"`
	Consumer string `json:"consumer"`
}

type streamJSON struct {
	Name        string            `json:"name"`
	Topics      []string          `json:"topics"`
	Subjects    []string          `json:"subjects"`
	Messages    uint64            `json:"messages"`
	Bytes       uint64            `json:"bytes"`
	FirstSeq    uint64            `json:"firstSeq"`
	FirstTS     int64             `json:"firstTs,omitempty"`
	LastSeq     uint64            `json:"lastSeq"`
	LastTS      int64             `json:"lastTs,omitempty"`
	MaxAgeMs    int64             `json:"maxAgeMs"`
	MaxBytes    int64             `json:"maxBytes"`
	Compaction  bool              `json:"compaction"`
	Storage     string            `json:"storage"`
	Replicas    int               `json:"replicas"`
	Consumers   int               `json:"consumers"`
	Groups      []streamGroupJSON `json:"groups"`
	Description string            `json:"description,omitempty"`
	// TopicsTruncated: the stream holds more than
	// inspect.MaxListedTopics topics;
	// Topics lists some of them.
	TopicsTruncated bool `json:"topicsTruncated,omitempty"`
}

type topicsJSON struct {
	Streams []streamJSON `json:"streams"`
}

// listTopics lists the streams that hold eventhub topics: the streams the hub
// created (EH_*), streams capturing a configured topic pattern, and any
// other stream with a group of the hub on it.
func (h *Handler) listTopics(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	streams, err := h.topics.Streams(ctx)
	if err != nil {
		return err
	}
	var see func(string) bool
	if h.cfg.Visible != nil {
		see = h.cfg.Visible(r)
	}
	out := topicsJSON{Streams: make([]streamJSON, 0, len(streams))}
	for i := range streams {
		s := streamOf(&streams[i])
		if see != nil && !visibleOnly(see, &s) {
			continue
		}
		out.Streams = append(out.Streams, s)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// visibleOnly keeps the topics and groups of s that see accepts, and
// reports whether any topic is left.
func visibleOnly(see func(string) bool, s *streamJSON) bool {
	s.Topics = slices.DeleteFunc(s.Topics, func(t string) bool { return !see(t) })
	s.Groups = slices.DeleteFunc(s.Groups, func(g streamGroupJSON) bool { return !see(g.Topic) })
	return len(s.Topics) > 0
}

func streamOf(sd *inspect.StreamDescription) streamJSON {
	s := streamJSON{
		Name:            sd.Name,
		Topics:          sd.Topics,
		Subjects:        sd.Subjects,
		Messages:        sd.Messages,
		Bytes:           sd.Bytes,
		FirstSeq:        sd.FirstSeq,
		FirstTS:         msTime(sd.FirstTime),
		LastSeq:         sd.LastSeq,
		LastTS:          msTime(sd.LastTime),
		MaxAgeMs:        sd.MaxAge.Milliseconds(),
		MaxBytes:        sd.MaxBytes,
		Compaction:      sd.Compaction,
		Storage:         sd.Storage,
		Replicas:        sd.Replicas,
		Consumers:       sd.Consumers,
		Groups:          make([]streamGroupJSON, 0, len(sd.Groups)),
		Description:     sd.Description,
		TopicsTruncated: sd.TopicsTruncated,
	}
	for _, g := range sd.Groups {
		s.Groups = append(s.Groups, streamGroupJSON{Group: g.Group, Topic: g.Topic, Consumer: g.Consumer})
	}
	return s
}
