package ops

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/inspect"
	"github.com/eventhub/eventhub/pattern"
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
	// Retry is the group's retry policy: how long a nacked event waits
	// before its next delivery. RetryDefault: the group set none, so
	// every hub retries with its own default (shown is this hub's).
	Retry        facade.RetryPolicy `json:"retry"`
	RetryDefault bool               `json:"retryDefault,omitempty"`
	// OrderBy is "key" for a group ordered by key.
	OrderBy string `json:"orderBy,omitempty"`
}

type adminGroupsJSON struct {
	Groups []adminGroupJSON `json:"groups"`
}

// adminGroups lists the groups of one topic (?topic=) or of every topic.
func (h *Handler) adminGroups(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	var topics []string
	if r.URL.Query().Get("topic") != "" {
		ti, err := h.lookupGroupTopic(ctx, r)
		if err != nil {
			return err
		}
		topics = append(topics, ti.Topic)
	} else {
		var err error
		if topics, err = h.groups.GroupTopics(ctx); err != nil {
			return err
		}
	}
	out := adminGroupsJSON{Groups: []adminGroupJSON{}}
	for _, topic := range topics {
		groups, err := h.groups.Groups(ctx, topic)
		if errors.Is(err, facade.ErrNotFound) {
			continue // deleted since it was listed
		}
		if err != nil {
			return err
		}
		if len(groups) == 0 {
			continue
		}
		dl, atLeast, err := h.deadLetterCounts(ctx, topic)
		if err != nil {
			return err
		}
		for i := range groups {
			out.Groups = append(out.Groups, h.adminGroupOf(topic, &groups[i], dl[groups[i].Group], atLeast))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *Handler) adminGroupOf(topic string, gi *inspect.GroupInfo, dead int, atLeast bool) adminGroupJSON {
	g := adminGroupJSON{
		Topic: topic, cursorJSON: cursorOf(gi), InFlight: gi.AckPending,
		DeadLettered: dead, DeadLetteredAtLeast: atLeast,
		Retry: gi.Retry, RetryDefault: gi.RetryDefault, OrderBy: gi.OrderBy,
	}
	if gi.Paused && gi.PauseRemaining > 0 {
		g.PauseUntilMs = h.cfg.Now().Add(gi.PauseRemaining).UnixMilli()
	}
	return g
}

// deadLetterCounts counts the dead letters of topic per group, reading the
// headers of at most maxScan messages of <topic>.dlq. A group over a
// pattern dead-letters each event to the dead-letter topic of the event's
// own topic: <pattern>.dlq reads them all, but for a pattern ending in
// "**", whose dead-letter topics no pattern names apart from its events,
// the pattern's own messages are read.
func (h *Handler) deadLetterCounts(ctx context.Context, topic string) (map[string]int, bool, error) {
	counts := map[string]int{}
	scope := facade.DeadLetterTopic(topic)
	if strings.HasSuffix(topic, "**") {
		scope = topic
	}
	_, end, err := h.events.Scan(ctx, scope, inspect.Scan{From: 1, Max: maxScan, HeadersOnly: true}, func(e *inspect.StoredEvent) bool {
		if g, ok := e.Event.Headers["dlq_group"]; ok {
			counts[g]++
		}
		return true
	})
	if errors.Is(err, facade.ErrNotFound) || pattern.HasWildcard(topic) && errors.Is(err, facade.ErrBadTopic) {
		return counts, false, nil // none yet: no stream holds them
	}
	if err != nil {
		return nil, false, err
	}
	return counts, !end, nil
}

// adminSeek moves a group: ?to=earliest|latest|seq:<n>|ts:<time>|id:<id>
// names the first event the group delivers next.
func (h *Handler) adminSeek(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	ti, group, err := h.topicGroup(ctx, r)
	if err != nil {
		return err
	}
	to, err := param(r, "to")
	if err != nil {
		return err
	}
	pos, err := ParsePosition(to)
	if err != nil {
		return fmt.Errorf("to: %w", err)
	}
	var next uint64
	switch pos.Kind {
	case PosNone, PosEarliest:
		next = 1
	case PosLatest:
		st, err := h.topics.StreamState(ctx, ti.Topic)
		if err != nil {
			return err
		}
		next = st.LastSeq + 1
	case PosSeq:
		next = pos.Seq
	case PosTime:
		next, err = h.events.SeqAtTime(ctx, ti.Topic, pos.Time)
	case PosID:
		next, err = h.events.SeqOfID(ctx, ti.Topic, pos.ID)
	}
	if err != nil {
		return fmt.Errorf("to: %w", err)
	}
	g, err := h.groups.SeekGroup(ctx, ti.Topic, group, next)
	return h.writeGroup(ctx, w, r, ti.Topic, g, err, map[string]any{"next": next})
}

// writeGroup answers a group's state after an action, as the group list
// shows it (its dead letters counted), with extra fields, or the action's
// error.
func (h *Handler) writeGroup(ctx context.Context, w http.ResponseWriter, r *http.Request, topic string, gi *inspect.GroupInfo, err error, extra map[string]any) error {
	if err != nil {
		return err
	}
	dl, atLeast, err := h.deadLetterCounts(ctx, topic)
	if err != nil {
		return fmt.Errorf("the action was done, but the group's dead letters could not be counted: %w", err)
	}
	out := map[string]any{"group": h.adminGroupOf(topic, gi, dl[gi.Group], atLeast)}
	for k, v := range extra {
		out[k] = v
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// defaultPause is how long a pause without ?until= or ?for= lasts: until
// resumed, in practice.
const defaultPause = 10 * 365 * 24 * time.Hour

// adminPause pauses a group (JetStream consumer pause): its members get
// nothing until ?until= (RFC 3339 or epoch ms), for ?for= (a Go duration),
// or until resumed. Deliveries already in flight stay with their members.
func (h *Handler) adminPause(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	ti, group, err := h.topicGroup(ctx, r)
	if err != nil {
		return err
	}
	until := h.cfg.Now().Add(defaultPause)
	q := r.URL.Query()
	switch {
	case q.Get("until") != "":
		s := q.Get("until")
		if isDigits(s) {
			pos, err := ParsePosition("ts:" + s)
			if err != nil {
				return fmt.Errorf("until: %w", err)
			}
			until = pos.Time
		} else if until, err = time.Parse(time.RFC3339Nano, strings.ReplaceAll(s, " ", "+")); err != nil {
			return fmt.Errorf("%w: until %q: want RFC 3339 or epoch ms", ErrBadRequest, s)
		}
	case q.Get("for") != "":
		d, err := time.ParseDuration(q.Get("for"))
		if err != nil || d <= 0 {
			return fmt.Errorf("%w: for %q: want a positive duration such as 10m", ErrBadRequest, q.Get("for"))
		}
		until = h.cfg.Now().Add(d)
	}
	g, err := h.groups.PauseGroup(ctx, ti.Topic, group, until)
	return h.writeGroup(ctx, w, r, ti.Topic, g, err, map[string]any{"pauseUntilMs": until.UnixMilli()})
}

// adminResume resumes a paused group.
func (h *Handler) adminResume(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	ti, group, err := h.topicGroup(ctx, r)
	if err != nil {
		return err
	}
	g, err := h.groups.ResumeGroup(ctx, ti.Topic, group)
	return h.writeGroup(ctx, w, r, ti.Topic, g, err, nil)
}

// adminDeleteGroup deletes a group's consumer with its cursor. Members
// still running create the group again where their subscription's from
// says.
func (h *Handler) adminDeleteGroup(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	ti, group, err := h.topicGroup(ctx, r)
	if err != nil {
		return err
	}
	if err := h.groups.DeleteGroup(ctx, ti.Topic, group); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"topic": ti.Topic, "group": group, "deleted": true})
	return nil
}
