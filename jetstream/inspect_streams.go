package jetstream

// Description of the streams that hold topics, for the ops endpoints'
// topic listing.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/inspect"
)

// StreamDescription is a stream that holds topics ([inspect.StreamDescription]).
type StreamDescription = inspect.StreamDescription

// Streams describes the streams that hold topics: the streams the hub
// created (EH_*), streams capturing a configured topic pattern, and any
// other stream with a group of the hub on it. Sorted by name.
func (a *Admin) Streams(ctx context.Context) ([]StreamDescription, error) {
	b := a.Bus
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	configured := map[string]bool{}
	for _, tc := range b.cfg.Topics {
		l := b.js.StreamNames(ctx, jetstream.WithStreamListSubject(tc.Pattern))
		for name := range l.Name() {
			configured[name] = true
		}
		if err := l.Err(); err != nil {
			return nil, fmt.Errorf("%w: list streams: %w", facade.ErrUnavailable, err)
		}
	}
	l := b.js.ListStreams(ctx)
	var infos []*jetstream.StreamInfo
	for si := range l.Info() {
		infos = append(infos, si)
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("%w: list streams: %w", facade.ErrUnavailable, err)
	}
	out := []StreamDescription{}
	for _, si := range infos {
		s, ok, err := b.describeStream(ctx, si, configured[si.Config.Name])
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b StreamDescription) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// storedTopics adds to topics the topics a family stream (one with wildcard
// subjects) holds events of, from the server's per-subject counts: a keyed
// subject <topic>._k.<key> counts as its topic.
func (b *Bus) storedTopics(ctx context.Context, si *jetstream.StreamInfo, topics map[string]bool) error {
	if si.State.Msgs == 0 {
		return nil
	}
	stream, err := b.js.Stream(ctx, si.Config.Name)
	if err != nil {
		return fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, si.Config.Name, err)
	}
	for _, pattern := range si.Config.Subjects {
		if !strings.ContainsAny(pattern, "*>") {
			continue
		}
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(pattern))
		if err != nil {
			return fmt.Errorf("%w: subjects of %s: %w", facade.ErrUnavailable, si.Config.Name, err)
		}
		for subj := range info.State.Subjects {
			if len(topics) > inspect.MaxListedTopics {
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

// describeStream builds a stream's description; ok is false for a stream
// that holds no eventhub topic.
func (b *Bus) describeStream(ctx context.Context, si *jetstream.StreamInfo, configured bool) (StreamDescription, bool, error) {
	cfg, st := &si.Config, &si.State
	s := StreamDescription{
		Name:        cfg.Name,
		Subjects:    slices.Clone(cfg.Subjects),
		Messages:    st.Msgs,
		Bytes:       st.Bytes,
		FirstSeq:    st.FirstSeq,
		FirstTime:   st.FirstTime,
		LastSeq:     st.LastSeq,
		LastTime:    st.LastTime,
		MaxAge:      cfg.MaxAge,
		MaxBytes:    cfg.MaxBytes,
		Compaction:  cfg.MaxMsgsPerSubject == 1,
		Storage:     strings.ToLower(cfg.Storage.String()),
		Replicas:    cfg.Replicas,
		Consumers:   st.Consumers,
		Groups:      []GroupConsumer{},
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
	ours := configured || strings.HasPrefix(cfg.Name, streamPrefix)
	var consumers []*jetstream.ConsumerInfo
	if st.Consumers > 0 {
		stream, err := b.js.Stream(ctx, cfg.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return s, false, nil // deleted since it was listed
		}
		if err != nil {
			return s, false, fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, cfg.Name, err)
		}
		l := stream.ListConsumers(ctx)
		for ci := range l.Info() {
			if ci.Config.AckPolicy == jetstream.AckNonePolicy {
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
	if err := b.storedTopics(ctx, si, topics); err != nil {
		return s, false, err
	}
	if len(topics) > inspect.MaxListedTopics {
		s.TopicsTruncated = true
	}
	for _, ci := range consumers {
		t := ci.Config.Metadata[metaTopic]
		if t != "" {
			topics[t] = true
		}
		s.Groups = append(s.Groups, GroupConsumer{
			Group: cmp.Or(ci.Config.Metadata[metaGroup], ci.Name), Topic: t, Consumer: ci.Name,
		})
	}
	s.Topics = make([]string, 0, len(topics))
	for t := range topics {
		s.Topics = append(s.Topics, t)
	}
	slices.Sort(s.Topics)
	if len(s.Topics) > inspect.MaxListedTopics {
		s.Topics = s.Topics[:inspect.MaxListedTopics]
	}
	slices.SortFunc(s.Groups, func(a, b GroupConsumer) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Group, b.Group))
	})
	return s, true, nil
}

// DescribeStream describes the stream that holds topic (see [Admin.Streams]).
// Errors wrap [facade.ErrNotFound] when no stream holds it.
func (a *Admin) DescribeStream(ctx context.Context, topic string) (*StreamDescription, error) {
	b := a.Bus
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, err := b.existingTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	info, err := ti.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, ti.name, err)
	}
	s, _, err := b.describeStream(ctx, info, true)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// TopicCount counts topic's events from the stream's per-subject state (the
// hub's own stream of the topic: the stream's count).
func (a *Admin) TopicCount(ctx context.Context, topic string) (uint64, error) {
	b := a.Bus
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, err := b.existingTopic(ctx, topic)
	if err != nil {
		return 0, err
	}
	if !ti.shared {
		info, err := ti.stream.Info(ctx)
		if err != nil {
			return 0, fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, ti.name, err)
		}
		return info.State.Msgs, nil
	}
	var n uint64
	for _, f := range ti.filters {
		info, err := ti.stream.Info(ctx, jetstream.WithSubjectFilter(f))
		if err != nil {
			return 0, fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, ti.name, err)
		}
		for _, c := range info.State.Subjects {
			n += c
		}
	}
	return n, nil
}
