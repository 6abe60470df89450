package ops

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/jetstream"
)

// adminGroupJSON is one group in the admin API: its cursor and counts,
// whether it is paused, and how many of its events were dead-lettered.
type adminGroupJSON struct {
	Topic string `json:"topic"`
	cursorJSON
	// InFlight: delivered to a member and not yet settled (AckPending).
	InFlight int `json:"inFlight"`
	// PauseUntilMs: while paused, when the pause ends (epoch ms).
	PauseUntilMs int64 `json:"pauseUntilMs,omitempty"`
	// DeadLettered counts the group's dead letters in <topic>.dlq;
	// DeadLetteredAtLeast when more than the admin API reads at once
	// (10000) are there, so the count is a lower bound.
	DeadLettered        int  `json:"deadLettered"`
	DeadLetteredAtLeast bool `json:"deadLetteredAtLeast,omitempty"`
}

type adminGroupsJSON struct {
	Groups []adminGroupJSON `json:"groups"`
}

// adminGroups lists the groups of one topic (?topic=) or of every topic.
func (h *Handler) adminGroups(w http.ResponseWriter, r *http.Request, _ string) {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	var tis []*jetstream.TopicInfo
	if r.URL.Query().Get("topic") != "" {
		ti, err := h.lookupTopic(ctx, r)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		tis = append(tis, ti)
	} else {
		topics, err := h.groupTopics(ctx)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		for _, t := range topics {
			ti, err := h.bus.LookupTopic(ctx, t)
			if errors.Is(err, facade.ErrNotFound) {
				continue
			}
			if err != nil {
				h.writeError(w, r, err)
				return
			}
			tis = append(tis, ti)
		}
	}
	out := adminGroupsJSON{Groups: []adminGroupJSON{}}
	for _, ti := range tis {
		groups, err := topicGroups(ctx, ti)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		if len(groups) == 0 {
			continue
		}
		dl, atLeast, err := h.deadLetterCounts(ctx, ti.Topic)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		for _, g := range groups {
			out.Groups = append(out.Groups, h.adminGroupOf(ctx, ti, g.group, g.info, dl[g.group], atLeast))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) adminGroupOf(ctx context.Context, ti *jetstream.TopicInfo, group string, ci *njs.ConsumerInfo, dead int, atLeast bool) adminGroupJSON {
	g := adminGroupJSON{
		Topic: ti.Topic, cursorJSON: h.cursorOf(ctx, ti, group, ci), InFlight: ci.NumAckPending,
		DeadLettered: dead, DeadLetteredAtLeast: atLeast,
	}
	if ci.Paused && ci.PauseRemaining > 0 {
		g.PauseUntilMs = h.cfg.Now().Add(ci.PauseRemaining).UnixMilli()
	}
	return g
}

// groupTopics returns the topics that have groups of the hub, from the
// metadata of every stream's consumers.
func (h *Handler) groupTopics(ctx context.Context) ([]string, error) {
	js := h.bus.JetStream()
	seen := map[string]bool{}
	l := js.ListStreams(ctx)
	var names []string
	for si := range l.Info() {
		if si.State.Consumers > 0 {
			names = append(names, si.Config.Name)
		}
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("%w: list streams: %w", facade.ErrUnavailable, err)
	}
	for _, name := range names {
		stream, err := js.Stream(ctx, name)
		if errors.Is(err, njs.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, name, err)
		}
		cl := stream.ListConsumers(ctx)
		for ci := range cl.Info() {
			if t := ci.Config.Metadata[metaTopic]; t != "" && ci.Config.AckPolicy != njs.AckNonePolicy {
				seen[t] = true
			}
		}
		if err := cl.Err(); err != nil && !errors.Is(err, njs.ErrStreamNotFound) {
			return nil, fmt.Errorf("%w: list consumers of %s: %w", facade.ErrUnavailable, name, err)
		}
	}
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	slices.Sort(out)
	return out, nil
}

// deadLetterCounts counts the dead letters of topic per group, reading the
// headers of at most maxScan messages of <topic>.dlq.
func (h *Handler) deadLetterCounts(ctx context.Context, topic string) (map[string]int, bool, error) {
	counts := map[string]int{}
	ti, err := h.bus.LookupTopic(ctx, facade.DeadLetterTopic(topic))
	if errors.Is(err, facade.ErrNotFound) {
		return counts, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	_, end, err := h.scan(ctx, ti.Stream, ti.Filters, 1, maxScan, true, func(msg njs.Msg, meta *njs.MsgMetadata) bool {
		e := jetstream.DecodeMsg(msg.Subject(), msg.Headers(), nil, meta.Sequence.Stream, meta.Timestamp)
		counts[e.Headers["dlq_group"]]++
		return true
	})
	if err != nil {
		return nil, false, err
	}
	return counts, !end, nil
}

// adminSeek moves a group: ?to=earliest|latest|seq:<n>|ts:<time>|id:<id>
// names the first event the group delivers next.
func (h *Handler) adminSeek(w http.ResponseWriter, r *http.Request, _ string) {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	ti, group, ci, err := h.topicGroup(ctx, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	to, err := param(r, "to")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	pos, err := ParsePosition(to)
	if err != nil {
		h.writeError(w, r, fmt.Errorf("to: %w", err))
		return
	}
	var next uint64
	switch pos.Kind {
	case PosNone, PosEarliest:
		next = 1
	case PosLatest:
		info, err := ti.Stream.Info(ctx)
		if err != nil {
			h.writeError(w, r, fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, ti.StreamName, err))
			return
		}
		next = info.State.LastSeq + 1
	case PosSeq:
		next = pos.Seq
	case PosTime:
		next, err = h.bus.SeqAtTime(ctx, ti.Topic, pos.Time)
	case PosID:
		next, err = h.bus.SeqOfID(ctx, ti.Topic, pos.ID)
	}
	if err != nil {
		h.writeError(w, r, fmt.Errorf("to: %w", err))
		return
	}
	if _, err := ti.Stream.ResetConsumerToSequence(ctx, ci.Name, next); err != nil {
		h.writeError(w, r, fmt.Errorf("%w: seek group %s of %s to %d: %w", facade.ErrUnavailable, group, ti.Topic, next, err))
		return
	}
	h.writeGroup(ctx, w, r, ti, group, ci.Name, map[string]any{"next": next})
}

// writeGroup answers a group's state after an action, with extra fields.
func (h *Handler) writeGroup(ctx context.Context, w http.ResponseWriter, r *http.Request, ti *jetstream.TopicInfo, group, consumer string, extra map[string]any) {
	cons, err := ti.Stream.Consumer(ctx, consumer)
	if err != nil {
		h.writeError(w, r, fmt.Errorf("%w: group %s of %s: %w", facade.ErrUnavailable, group, ti.Topic, err))
		return
	}
	g := h.adminGroupOf(ctx, ti, group, cons.CachedInfo(), 0, false)
	out := map[string]any{"group": g}
	for k, v := range extra {
		out[k] = v
	}
	writeJSON(w, http.StatusOK, out)
}

// defaultPause is how long a pause without ?until= or ?for= lasts: until
// resumed, in practice.
const defaultPause = 10 * 365 * 24 * time.Hour

// adminPause pauses a group (JetStream consumer pause): its members get
// nothing until ?until= (RFC 3339 or epoch ms), for ?for= (a Go duration),
// or until resumed. Deliveries already in flight stay with their members.
func (h *Handler) adminPause(w http.ResponseWriter, r *http.Request, _ string) {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	ti, group, ci, err := h.topicGroup(ctx, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	until := h.cfg.Now().Add(defaultPause)
	q := r.URL.Query()
	switch {
	case q.Get("until") != "":
		s := q.Get("until")
		if isDigits(s) {
			pos, err := ParsePosition("ts:" + s)
			if err != nil {
				h.writeError(w, r, fmt.Errorf("until: %w", err))
				return
			}
			until = pos.Time
		} else if until, err = time.Parse(time.RFC3339Nano, strings.ReplaceAll(s, " ", "+")); err != nil {
			h.writeError(w, r, fmt.Errorf("%w: until %q: want RFC 3339 or epoch ms", ErrBadRequest, s))
			return
		}
	case q.Get("for") != "":
		d, err := time.ParseDuration(q.Get("for"))
		if err != nil || d <= 0 {
			h.writeError(w, r, fmt.Errorf("%w: for %q: want a positive duration such as 10m", ErrBadRequest, q.Get("for")))
			return
		}
		until = h.cfg.Now().Add(d)
	}
	if _, err := h.bus.JetStream().PauseConsumer(ctx, ti.StreamName, ci.Name, until); err != nil {
		h.writeError(w, r, fmt.Errorf("%w: pause group %s of %s (needs nats-server 2.11+): %w", facade.ErrUnavailable, group, ti.Topic, err))
		return
	}
	h.writeGroup(ctx, w, r, ti, group, ci.Name, map[string]any{"pauseUntilMs": until.UnixMilli()})
}

// adminResume resumes a paused group.
func (h *Handler) adminResume(w http.ResponseWriter, r *http.Request, _ string) {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	ti, group, ci, err := h.topicGroup(ctx, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if _, err := h.bus.JetStream().ResumeConsumer(ctx, ti.StreamName, ci.Name); err != nil {
		h.writeError(w, r, fmt.Errorf("%w: resume group %s of %s: %w", facade.ErrUnavailable, group, ti.Topic, err))
		return
	}
	h.writeGroup(ctx, w, r, ti, group, ci.Name, nil)
}

// adminDeleteGroup deletes a group's consumer with its cursor. Members
// still running create the group again where their subscription's from
// says.
func (h *Handler) adminDeleteGroup(w http.ResponseWriter, r *http.Request, _ string) {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	ti, group, ci, err := h.topicGroup(ctx, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if err := ti.Stream.DeleteConsumer(ctx, ci.Name); err != nil {
		if errors.Is(err, njs.ErrConsumerNotFound) {
			err = fmt.Errorf("%w: topic %s has no group %s", facade.ErrNotFound, ti.Topic, group)
		} else {
			err = fmt.Errorf("%w: delete group %s of %s: %w", facade.ErrUnavailable, group, ti.Topic, err)
		}
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"topic": ti.Topic, "group": group, "deleted": true})
}
