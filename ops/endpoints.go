package ops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/eventjson"
	"github.com/eventhub/eventhub/jetstream"
)

// Consumer metadata keys the bus sets on the durable consumer of a group.
const (
	metaGroup = "eventhub_group"
	metaTopic = "eventhub_topic"
)

// healthz answers 200 while the process serves HTTP.
func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

type readyJSON struct {
	Status     string       `json:"status"`
	Durability string       `json:"durability,omitempty"`
	Error      *errorDetail `json:"error,omitempty"`
}

// readyz answers 200 when JetStream answers within ReadyTimeout, else 503.
func (h *Handler) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.ReadyTimeout)
	defer cancel()
	var err error
	if h.bus.Closed() {
		err = facade.ErrClosed
	} else {
		err = h.bus.Ready(ctx)
	}
	if err != nil {
		code, msg := wireError(err)
		writeJSON(w, http.StatusServiceUnavailable, readyJSON{
			Status: "unavailable", Durability: h.cfg.Durability,
			Error: &errorDetail{Code: code, Msg: msg},
		})
		return
	}
	writeJSON(w, http.StatusOK, readyJSON{Status: "ready", Durability: h.cfg.Durability})
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
func (h *Handler) lookupTopic(ctx context.Context, r *http.Request) (*jetstream.TopicInfo, error) {
	topic, err := param(r, "topic")
	if err != nil {
		return nil, err
	}
	if err := facade.ValidateTopic(topic); err != nil {
		return nil, err
	}
	ti, err := h.bus.LookupTopic(ctx, topic)
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
func (h *Handler) cursors(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	ti, err := h.lookupTopic(ctx, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	infos, err := topicGroups(ctx, ti)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := cursorsJSON{Topic: ti.Topic, Stream: ti.StreamName, Cursors: []cursorJSON{}}
	for _, g := range infos {
		out.Cursors = append(out.Cursors, h.cursorOf(ctx, ti, g.group, g.info))
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) cursorOf(ctx context.Context, ti *jetstream.TopicInfo, group string, ci *njs.ConsumerInfo) cursorJSON {
	c := cursorJSON{
		Group:        group,
		Consumer:     ci.Name,
		LastSeq:      ci.AckFloor.Stream,
		DeliveredSeq: ci.Delivered.Stream,
		Pending:      ci.NumPending,
		AckPending:   ci.NumAckPending,
		Lag:          ci.NumPending + uint64(max(ci.NumAckPending, 0)),
		Redelivered:  ci.NumRedelivered,
		Waiting:      ci.NumWaiting,
		Paused:       ci.Paused,
	}
	if ci.Delivered.Last != nil {
		c.LastActiveTS = msTime(*ci.Delivered.Last)
	}
	if e := eventAt(ctx, ti, c.LastSeq); e != nil {
		c.LastID, c.LastTS = e.ID, e.TS
	}
	return c
}

// eventAt reads the event at seq (one message lookup); nil when seq is 0,
// the message is gone or the lookup fails.
func eventAt(ctx context.Context, ti *jetstream.TopicInfo, seq uint64) *facade.EventRecord {
	if seq == 0 {
		return nil
	}
	raw, err := ti.Stream.GetMsg(ctx, seq)
	if err != nil {
		return nil
	}
	return jetstream.DecodeMsg(raw.Subject, raw.Header, raw.Data, raw.Sequence, raw.Time)
}

type groupInfo struct {
	group string
	info  *njs.ConsumerInfo
}

// topicGroups lists the groups of a topic: the consumers of its stream
// whose metadata names the topic, or, for consumers made outside the hub,
// whose filter subjects are the topic's. Consumers without acks (ordered
// consumers, replays) are not groups.
func topicGroups(ctx context.Context, ti *jetstream.TopicInfo) ([]groupInfo, error) {
	var out []groupInfo
	l := ti.Stream.ListConsumers(ctx)
	for ci := range l.Info() {
		if g, ok := groupOf(ci, ti); ok {
			out = append(out, groupInfo{g, ci})
		}
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("%w: list consumers of %s: %w", facade.ErrUnavailable, ti.StreamName, err)
	}
	slices.SortFunc(out, func(a, b groupInfo) int { return cmp.Compare(a.group, b.group) })
	return out, nil
}

// groupOf reports whether consumer ci is a group of the topic, and its
// group name.
func groupOf(ci *njs.ConsumerInfo, ti *jetstream.TopicInfo) (string, bool) {
	cfg := &ci.Config
	if cfg.AckPolicy == njs.AckNonePolicy {
		return "", false
	}
	if t, ok := cfg.Metadata[metaTopic]; ok {
		if t != ti.Topic {
			return "", false
		}
		return cmp.Or(cfg.Metadata[metaGroup], ci.Name), true
	}
	filters := cfg.FilterSubjects
	if cfg.FilterSubject != "" {
		filters = []string{cfg.FilterSubject}
	}
	switch {
	case len(filters) == 0:
		return ci.Name, !ti.Shared // the whole stream is the topic's
	case len(filters) == 1 && filters[0] == ti.Topic:
		return ci.Name, true
	case sameSet(filters, ti.Filters):
		return ci.Name, true
	}
	return "", false
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}

// findGroup returns the consumer info of group on the topic: the consumer
// named as the bus names it, else (consumers made outside the hub) the
// one topicGroups reports under that name. ErrNotFound when neither exists.
func findGroup(ctx context.Context, ti *jetstream.TopicInfo, group string) (*njs.ConsumerInfo, error) {
	cons, err := ti.Stream.Consumer(ctx, ti.ConsumerName(group))
	if err == nil {
		ci := cons.CachedInfo()
		if g, ok := groupOf(ci, ti); ok && g == group {
			return ci, nil
		}
	} else if !errors.Is(err, njs.ErrConsumerNotFound) {
		return nil, fmt.Errorf("%w: group %s of %s: %w", facade.ErrUnavailable, group, ti.Topic, err)
	}
	groups, err := topicGroups(ctx, ti)
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		if g.group == group {
			return g.info, nil
		}
	}
	return nil, fmt.Errorf("%w: topic %s has no group %s", facade.ErrNotFound, ti.Topic, group)
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
func (h *Handler) lag(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	ti, err := h.lookupTopic(ctx, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	group, err := param(r, "group")
	if err == nil {
		err = facade.ValidateGroup(group)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	ci, err := findGroup(ctx, ti, group)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := lagJSON{
		Topic: ti.Topic, Group: group, Stream: ti.StreamName, Consumer: ci.Name,
		Pending:    ci.NumPending,
		AckPending: ci.NumAckPending,
		Lag:        ci.NumPending + uint64(max(ci.NumAckPending, 0)),
		Cursor:     facade.CursorPosition{Topic: ti.Topic, LastSeq: ci.AckFloor.Stream},
	}
	if e := eventAt(ctx, ti, ci.AckFloor.Stream); e != nil {
		out.Cursor.LastID, out.Cursor.LastTS = e.ID, e.TS
	}
	now := h.cfg.Now()
	if out.Lag == 0 {
		out.LagMs = new(int64)
	} else {
		raw, err := firstFrom(ctx, ti, groupFilters(ci, ti), ci.AckFloor.Stream+1)
		if err != nil && !errors.Is(err, errNoEvent) {
			h.writeError(w, r, err)
			return
		}
		if raw != nil {
			e := jetstream.DecodeMsg(raw.Subject, raw.Header, raw.Data, raw.Sequence, raw.Time)
			out.Oldest = &positionJSON{Seq: raw.Sequence, ID: e.ID, TS: e.TS, StoredTS: raw.Time.UnixMilli()}
			ms := max(now.Sub(raw.Time).Milliseconds(), 0)
			out.LagMs = &ms
		}
	}
	info, err := ti.Stream.Info(ctx)
	if err != nil {
		h.writeError(w, r, fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, ti.StreamName, err))
		return
	}
	out.StreamLastSeq, out.StreamLastTS = info.State.LastSeq, msTime(info.State.LastTime)
	writeJSON(w, http.StatusOK, out)
}

// groupFilters returns the subjects a group's consumer reads: its filter
// subjects, or the topic's when it has none.
func groupFilters(ci *njs.ConsumerInfo, ti *jetstream.TopicInfo) []string {
	switch {
	case len(ci.Config.FilterSubjects) > 0:
		return ci.Config.FilterSubjects
	case ci.Config.FilterSubject != "":
		return []string{ci.Config.FilterSubject}
	}
	return ti.Filters
}

var errNoEvent = errors.New("no event")

// firstFrom returns the first message at or after seq on one of the
// filter subjects: one "next by subject" lookup per subject. errNoEvent
// when there is none.
func firstFrom(ctx context.Context, ti *jetstream.TopicInfo, filters []string, seq uint64) (*njs.RawStreamMsg, error) {
	var best *njs.RawStreamMsg
	for _, f := range filters {
		raw, err := ti.Stream.GetMsg(ctx, seq, njs.WithGetMsgSubject(f))
		if errors.Is(err, njs.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: stream %s: message lookup: %w", facade.ErrUnavailable, ti.StreamName, err)
		}
		if best == nil || raw.Sequence < best.Sequence {
			best = raw
		}
	}
	if best == nil {
		return nil, errNoEvent
	}
	return best, nil
}

// latestByKey answers the newest event of one key of a topic.
func (h *Handler) latestByKey(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	topic, err := param(r, "topic")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if _, ok := r.URL.Query()["key"]; !ok {
		h.writeError(w, r, fmt.Errorf("%w: query parameter %q is required", ErrBadRequest, "key"))
		return
	}
	key := r.URL.Query().Get("key")
	if key == "" {
		h.writeError(w, r, fmt.Errorf("%w: key must not be empty", ErrBadRequest))
		return
	}
	var kr facade.KeyReader = h.bus
	got, err := kr.LatestByKey(ctx, topic, []string{key})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	e, ok := got[key]
	if !ok {
		h.writeError(w, r, fmt.Errorf("%w: topic %s has no event with key %q", facade.ErrNotFound, topic, key))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(eventjson.Append(nil, e), '\n'))
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
	// TopicsTruncated: the stream holds more than maxListedTopics topics;
	// Topics lists some of them.
	TopicsTruncated bool `json:"topicsTruncated,omitempty"`
}

// maxListedTopics bounds the topics /topics lists for one family stream.
const maxListedTopics = 1000

type topicsJSON struct {
	Streams []streamJSON `json:"streams"`
}

// topics lists the streams that hold eventhub topics: the streams the hub
// created (EH_*), streams capturing a configured topic pattern, and any
// other stream with a group of the hub on it.
func (h *Handler) topics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	js := h.bus.JetStream()
	configured := map[string]bool{}
	for _, tc := range h.bus.Config().Topics {
		l := js.StreamNames(ctx, njs.WithStreamListSubject(tc.Pattern))
		for name := range l.Name() {
			configured[name] = true
		}
		if err := l.Err(); err != nil {
			h.writeError(w, r, fmt.Errorf("%w: list streams: %w", facade.ErrUnavailable, err))
			return
		}
	}
	out := topicsJSON{Streams: []streamJSON{}}
	l := js.ListStreams(ctx)
	var infos []*njs.StreamInfo
	for si := range l.Info() {
		infos = append(infos, si)
	}
	if err := l.Err(); err != nil {
		h.writeError(w, r, fmt.Errorf("%w: list streams: %w", facade.ErrUnavailable, err))
		return
	}
	for _, si := range infos {
		s, ok, err := h.describeStream(ctx, si, configured[si.Config.Name])
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		if ok {
			out.Streams = append(out.Streams, s)
		}
	}
	slices.SortFunc(out.Streams, func(a, b streamJSON) int { return cmp.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, out)
}

// storedTopics adds to topics the topics a family stream (one with wildcard
// subjects) holds events of, from the server's per-subject counts: a keyed
// subject <topic>._k.<key> counts as its topic.
func (h *Handler) storedTopics(ctx context.Context, si *njs.StreamInfo, topics map[string]bool) error {
	if si.State.Msgs == 0 {
		return nil
	}
	stream, err := h.bus.JetStream().Stream(ctx, si.Config.Name)
	if err != nil {
		return fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, si.Config.Name, err)
	}
	for _, pattern := range si.Config.Subjects {
		if !strings.ContainsAny(pattern, "*>") {
			continue
		}
		info, err := stream.Info(ctx, njs.WithSubjectFilter(pattern))
		if err != nil {
			return fmt.Errorf("%w: subjects of %s: %w", facade.ErrUnavailable, si.Config.Name, err)
		}
		for subj := range info.State.Subjects {
			if len(topics) > maxListedTopics {
				return nil
			}
			topic, _, _ := strings.Cut(subj, "._k.")
			if facade.ValidateTopic(topic) == nil {
				topics[topic] = true
			}
		}
	}
	return nil
}

// describeStream builds a stream's entry; ok is false for a stream that
// holds no eventhub topic.
func (h *Handler) describeStream(ctx context.Context, si *njs.StreamInfo, configured bool) (streamJSON, bool, error) {
	cfg, st := &si.Config, &si.State
	s := streamJSON{
		Name:        cfg.Name,
		Subjects:    slices.Clone(cfg.Subjects),
		Messages:    st.Msgs,
		Bytes:       st.Bytes,
		FirstSeq:    st.FirstSeq,
		FirstTS:     msTime(st.FirstTime),
		LastSeq:     st.LastSeq,
		LastTS:      msTime(st.LastTime),
		MaxAgeMs:    cfg.MaxAge.Milliseconds(),
		MaxBytes:    cfg.MaxBytes,
		Compaction:  cfg.MaxMsgsPerSubject == 1,
		Storage:     strings.ToLower(cfg.Storage.String()),
		Replicas:    cfg.Replicas,
		Consumers:   st.Consumers,
		Groups:      []streamGroupJSON{},
		Description: cfg.Description,
	}
	if s.Subjects == nil {
		s.Subjects = []string{}
	}
	topics := map[string]bool{}
	for _, subj := range cfg.Subjects {
		if !strings.ContainsAny(subj, "*>") {
			topics[subj] = true
		}
	}
	ours := configured || strings.HasPrefix(cfg.Name, "EH_")
	var consumers []*njs.ConsumerInfo
	if st.Consumers > 0 {
		stream, err := h.bus.JetStream().Stream(ctx, cfg.Name)
		if errors.Is(err, njs.ErrStreamNotFound) {
			return s, false, nil // deleted since it was listed
		}
		if err != nil {
			return s, false, fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, cfg.Name, err)
		}
		l := stream.ListConsumers(ctx)
		for ci := range l.Info() {
			if ci.Config.AckPolicy == njs.AckNonePolicy {
				continue // ordered consumers and replays are not groups
			}
			if _, ok := ci.Config.Metadata[metaGroup]; ok {
				ours = true
			}
			consumers = append(consumers, ci)
		}
		if err := l.Err(); err != nil {
			return s, false, fmt.Errorf("%w: list consumers of %s: %w", facade.ErrUnavailable, cfg.Name, err)
		}
	}
	if !ours {
		return s, false, nil
	}
	if err := h.storedTopics(ctx, si, topics); err != nil {
		return s, false, err
	}
	if len(topics) > maxListedTopics {
		s.TopicsTruncated = true
	}
	for _, ci := range consumers {
		t := ci.Config.Metadata[metaTopic]
		if t != "" {
			topics[t] = true
		}
		s.Groups = append(s.Groups, streamGroupJSON{
			Group: cmp.Or(ci.Config.Metadata[metaGroup], ci.Name), Topic: t, Consumer: ci.Name,
		})
	}
	s.Topics = make([]string, 0, len(topics))
	for t := range topics {
		s.Topics = append(s.Topics, t)
	}
	slices.Sort(s.Topics)
	if len(s.Topics) > maxListedTopics {
		s.Topics = s.Topics[:maxListedTopics]
	}
	slices.SortFunc(s.Groups, func(a, b streamGroupJSON) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Group, b.Group))
	})
	return s, true, nil
}
