package jetstream

// Inspection and administration of groups: which groups a topic has, where
// each one stands, and the operator's actions on them (seek, pause, resume,
// delete). The ops endpoints and GetCursor use the same functions, so they
// always agree on what a topic's groups are.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/inspect"
)

// Metadata keys the bus sets on the durable consumer of a group.
const (
	metaGroup = "eventhub_group"
	metaTopic = "eventhub_topic"
)

type (
	// GroupInfo is a group of a topic as the server reports it
	// ([inspect.GroupInfo]).
	GroupInfo = inspect.GroupInfo
	// GroupLag is a group with its oldest unacknowledged event
	// ([inspect.GroupLag]).
	GroupLag = inspect.GroupLag
)

// groupConsumer is a group of a topic and its consumer's info.
type groupConsumer struct {
	group string
	info  *jetstream.ConsumerInfo
}

// groupOf reports whether consumer ci is a group of topic ti, and its group
// name: the consumers of the topic's stream whose metadata names the topic,
// or, for consumers made outside the hub, whose filter subjects are the
// topic's. Consumers without acks (ordered consumers, replays) are not
// groups. It is a pure function.
func groupOf(ci *jetstream.ConsumerInfo, ti *topicInfo) (string, bool) {
	cfg := &ci.Config
	if cfg.AckPolicy == jetstream.AckNonePolicy {
		return "", false
	}
	if t, ok := cfg.Metadata[metaTopic]; ok {
		if t != ti.topic {
			return "", false
		}
		return cmp.Or(cfg.Metadata[metaGroup], ci.Name), true
	}
	filters := consumerFilters(ci)
	switch {
	case len(filters) == 0:
		return ci.Name, !ti.shared // the whole stream is the topic's
	case len(filters) == 1 && filters[0] == ti.topic:
		return ci.Name, true
	case sameSet(filters, ti.filters):
		return ci.Name, true
	}
	return "", false
}

func consumerFilters(ci *jetstream.ConsumerInfo) []string {
	if ci.Config.FilterSubject != "" {
		return []string{ci.Config.FilterSubject}
	}
	return ci.Config.FilterSubjects
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

// groupsOf lists the groups of a topic (see groupOf), sorted by name.
func (b *Bus) groupsOf(ctx context.Context, ti *topicInfo) ([]groupConsumer, error) {
	var out []groupConsumer
	l := ti.stream.ListConsumers(ctx)
	for ci := range l.Info() {
		if g, ok := groupOf(ci, ti); ok {
			out = append(out, groupConsumer{g, ci})
		}
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("%w: list consumers of %s: %w", facade.ErrUnavailable, ti.name, err)
	}
	slices.SortFunc(out, func(a, b groupConsumer) int { return cmp.Compare(a.group, b.group) })
	return out, nil
}

// findGroup returns the consumer info of group on the topic: the consumer
// named as the bus names it, else (consumers made outside the hub) the one
// groupsOf reports under that name. [facade.ErrNotFound] when neither
// exists. The common case is one request.
func (b *Bus) findGroup(ctx context.Context, ti *topicInfo, group string) (*jetstream.ConsumerInfo, error) {
	cons, err := ti.stream.Consumer(ctx, consumerNameFor(group, ti.topic, ti.shared))
	if err == nil {
		ci := cons.CachedInfo()
		if g, ok := groupOf(ci, ti); ok && g == group {
			return ci, nil
		}
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("group %s of %s: %w", group, ti.topic, translate(err))
	}
	groups, err := b.groupsOf(ctx, ti)
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		if g.group == group {
			return g.info, nil
		}
	}
	return nil, fmt.Errorf("%w: topic %s has no group %s", facade.ErrNotFound, ti.topic, group)
}

// groupInfo describes a group from its consumer's info, reading the event
// at its cursor (one message lookup).
func (b *Bus) groupInfo(ctx context.Context, ti *topicInfo, group string, ci *jetstream.ConsumerInfo) GroupInfo {
	g := GroupInfo{
		Group:          group,
		Consumer:       ci.Name,
		Cursor:         b.cursorOf(ctx, ti, ci.AckFloor.Stream),
		DeliveredSeq:   ci.Delivered.Stream,
		Pending:        ci.NumPending,
		AckPending:     ci.NumAckPending,
		Lag:            ci.NumPending + uint64(max(ci.NumAckPending, 0)),
		Redelivered:    ci.NumRedelivered,
		Waiting:        ci.NumWaiting,
		Paused:         ci.Paused,
		PauseRemaining: ci.PauseRemaining,
		Filters:        slices.Clone(consumerFilters(ci)),
		Retry:          b.groupRetry(ci.Config),
		OrderBy:        groupOrder(ci.Config),
	}
	_, custom := ci.Config.Metadata[metaRetry]
	g.RetryDefault = !custom
	if len(g.Filters) == 0 {
		g.Filters = slices.Clone(ti.filters)
	}
	if ci.Delivered.Last != nil {
		g.LastActive = *ci.Delivered.Last
	}
	return g
}

// lookupGroup resolves topic and group for the exported group functions.
func (b *Bus) lookupGroup(ctx context.Context, topic, group string) (*topicInfo, *jetstream.ConsumerInfo, error) {
	if err := facade.ValidateGroup(group); err != nil {
		return nil, nil, err
	}
	ti, err := b.groupTopic(ctx, topic, false)
	if err != nil {
		return nil, nil, err
	}
	ci, err := b.findGroup(ctx, ti, group)
	if err != nil {
		return nil, nil, err
	}
	return ti, ci, nil
}

// Groups lists the groups of topic, sorted by name, with their cursors and
// counts: the consumers of the topic's stream that the bus made for the
// topic, and consumers made outside the hub whose filter subjects are the
// topic's. topic may be a pattern: the groups that read that topic family.
// It is the one definition of a topic's groups; [Bus.GetCursor],
// [Admin.Group] and the group actions find a group the same way. Errors wrap
// [facade.ErrNotFound] when no stream holds the topic, or
// [facade.ErrUnavailable].
func (a *Admin) Groups(ctx context.Context, topic string) ([]GroupInfo, error) {
	b := a.Bus
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, err := b.groupTopic(ctx, topic, false)
	if err != nil {
		return nil, err
	}
	groups, err := b.groupsOf(ctx, ti)
	if err != nil {
		return nil, err
	}
	out := make([]GroupInfo, 0, len(groups))
	for _, g := range groups {
		out = append(out, b.groupInfo(ctx, ti, g.group, g.info))
	}
	return out, nil
}

// Group returns one group of topic (see [Admin.Groups]); [facade.ErrNotFound]
// when the topic has no such group.
func (a *Admin) Group(ctx context.Context, topic, group string) (*GroupInfo, error) {
	b := a.Bus
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, ci, err := b.lookupGroup(ctx, topic, group)
	if err != nil {
		return nil, err
	}
	g := b.groupInfo(ctx, ti, group, ci)
	return &g, nil
}

// GroupLag returns one group of topic with the oldest event it has not
// acknowledged (one "next by subject" lookup per filter subject) and the
// stream's tail.
func (a *Admin) GroupLag(ctx context.Context, topic, group string) (*GroupLag, error) {
	b := a.Bus
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, ci, err := b.lookupGroup(ctx, topic, group)
	if err != nil {
		return nil, err
	}
	out := &GroupLag{GroupInfo: b.groupInfo(ctx, ti, group, ci)}
	if out.Lag > 0 {
		raw, err := b.firstFrom(ctx, ti, out.Filters, ci.AckFloor.Stream+1)
		if err != nil {
			return nil, err
		}
		if raw != nil {
			out.Oldest = fromMsg(raw.Subject, raw.Header, raw.Data, raw.Sequence, raw.Time)
			out.OldestStored = raw.Time
		}
	}
	info, err := ti.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, ti.name, err)
	}
	out.StreamLastSeq, out.StreamLastTime = info.State.LastSeq, info.State.LastTime
	return out, nil
}

// firstFrom returns the first message at or after seq on one of the filter
// subjects: one "next by subject" lookup per subject; nil when there is
// none.
func (b *Bus) firstFrom(ctx context.Context, ti *topicInfo, filters []string, seq uint64) (*jetstream.RawStreamMsg, error) {
	var best *jetstream.RawStreamMsg
	for _, f := range filters {
		raw, err := ti.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(f))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: stream %s: message lookup: %w", facade.ErrUnavailable, ti.name, err)
		}
		if best == nil || raw.Sequence < best.Sequence {
			best = raw
		}
	}
	return best, nil
}

// SeekGroup moves group of topic so that the next event it delivers is the
// first at or after stream sequence next (a consumer reset: the group keeps
// its configuration and name). Deliveries in flight stay with their
// members. It returns the group afterwards.
func (a *Admin) SeekGroup(ctx context.Context, topic, group string, next uint64) (*GroupInfo, error) {
	b := a.Bus
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, ci, err := b.lookupGroup(ctx, topic, group)
	if err != nil {
		return nil, err
	}
	if err := resetGroup(ctx, ti.stream, ci.Name, next); err != nil {
		return nil, fmt.Errorf("%w: seek group %s of %s to %d: %w", facade.ErrUnavailable, group, topic, next, err)
	}
	return b.reloadGroup(ctx, ti, group, ci.Name)
}

// PauseGroup pauses group of topic until until (JetStream consumer pause,
// nats-server 2.11+): its members get nothing until then or
// [Admin.ResumeGroup]. Deliveries in flight stay with their members.
func (a *Admin) PauseGroup(ctx context.Context, topic, group string, until time.Time) (*GroupInfo, error) {
	b := a.Bus
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, ci, err := b.lookupGroup(ctx, topic, group)
	if err != nil {
		return nil, err
	}
	if _, err := b.js.PauseConsumer(ctx, ti.name, ci.Name, until); err != nil {
		return nil, fmt.Errorf("%w: pause group %s of %s (needs nats-server 2.11+): %w", facade.ErrUnavailable, group, topic, err)
	}
	return b.reloadGroup(ctx, ti, group, ci.Name)
}

// ResumeGroup resumes a paused group of topic.
func (a *Admin) ResumeGroup(ctx context.Context, topic, group string) (*GroupInfo, error) {
	b := a.Bus
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, ci, err := b.lookupGroup(ctx, topic, group)
	if err != nil {
		return nil, err
	}
	if _, err := b.js.ResumeConsumer(ctx, ti.name, ci.Name); err != nil {
		return nil, fmt.Errorf("%w: resume group %s of %s: %w", facade.ErrUnavailable, group, topic, err)
	}
	return b.reloadGroup(ctx, ti, group, ci.Name)
}

// DeleteGroup deletes group's consumer with its cursor. Members still
// running create the group again where their subscription's from says.
func (a *Admin) DeleteGroup(ctx context.Context, topic, group string) error {
	b := a.Bus
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, ci, err := b.lookupGroup(ctx, topic, group)
	if err != nil {
		return err
	}
	if err := ti.stream.DeleteConsumer(ctx, ci.Name); err != nil {
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("%w: topic %s has no group %s", facade.ErrNotFound, topic, group)
		}
		return fmt.Errorf("%w: delete group %s of %s: %w", facade.ErrUnavailable, group, topic, err)
	}
	return nil
}

func (b *Bus) reloadGroup(ctx context.Context, ti *topicInfo, group, consumer string) (*GroupInfo, error) {
	cons, err := ti.stream.Consumer(ctx, consumer)
	if err != nil {
		return nil, fmt.Errorf("%w: group %s of %s: %w", facade.ErrUnavailable, group, ti.topic, err)
	}
	g := b.groupInfo(ctx, ti, group, cons.CachedInfo())
	return &g, nil
}

// GroupTopics returns the topics that have groups the hub made, sorted,
// from the metadata of every stream's consumers.
func (a *Admin) GroupTopics(ctx context.Context) ([]string, error) {
	b := a.Bus
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	seen := map[string]bool{}
	l := b.js.ListStreams(ctx)
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
		stream, err := b.js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, name, err)
		}
		cl := stream.ListConsumers(ctx)
		for ci := range cl.Info() {
			if t := ci.Config.Metadata[metaTopic]; t != "" && ci.Config.AckPolicy != jetstream.AckNonePolicy {
				seen[t] = true
			}
		}
		if err := cl.Err(); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
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

// NextSeq returns the stream sequence of topic's first event (with key, when
// key is not empty) at or after sequence from (one "next by subject" lookup
// per filter subject), and false when there is none.
func (b *Bus) NextSeq(ctx context.Context, topic, key string, from uint64) (uint64, bool, error) {
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, err := b.existingTopic(ctx, topic)
	if err != nil {
		return 0, false, err
	}
	filters := ti.filters
	if key != "" {
		if !ti.keyed {
			return 0, false, nil
		}
		filters = []string{subjectFor(ti.topic, key)}
	}
	raw, err := b.firstFrom(ctx, ti, filters, from)
	if err != nil || raw == nil {
		return 0, false, err
	}
	return raw.Sequence, true, nil
}
