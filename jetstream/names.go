package jetstream

import (
	"context"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/inspect"
)

// TopicStream describes a stream that holds topics, as native NATS clients
// see it: the names their JetStream API calls use.
type TopicStream struct {
	// Name is the stream's name.
	Name string
	// Topic is the one topic the stream holds when it is the hub's own
	// stream of that topic ("<topic>" and its keyed subjects); "" for a
	// stream that holds several topics (a family stream, or an operator's).
	Topic string
	// Subjects are the stream's subjects.
	Subjects []string
	// Groups are the groups found on the stream, with the topic each one
	// reads: on a shared stream (Topic == "") the hub's, on a topic's own
	// stream every consumer with acks. Listed only when asked for.
	Groups []GroupConsumer
}

// GroupConsumer is the durable consumer of a hub group
// ([inspect.GroupConsumer]).
type GroupConsumer = inspect.GroupConsumer

// ConsumerName is the name of the durable consumer that holds group of
// topic, on the hub's own stream of the topic (shared false) or on a
// stream that holds several topics (shared true). A native JetStream
// client bound to that consumer is a member of the group.
func ConsumerName(group, topic string, shared bool) string {
	return consumerNameFor(group, topic, shared)
}

// StreamNameFor is the name of the stream the hub creates for topic when
// none captures it yet: its own stream "EH_<topic>_<hash>", or the family
// stream the configuration names (shared true).
func (b *Bus) StreamNameFor(topic string) (name string, shared bool) {
	if tc := b.cfg.topicConfig(topic); tc.Stream != "" {
		return tc.Stream, true
	}
	return streamNameFor(topic), false
}

// TopicStreams lists the streams whose subjects overlap filter (a NATS
// subject, wildcards allowed), and with groups the groups on each (see
// TopicStream.Groups). It blocks on JetStream API calls, bounded by ctx or
// the bus's timeout, and is safe for concurrent use.
func (b *Bus) TopicStreams(ctx context.Context, filter string, groups bool) ([]TopicStream, error) {
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	l := b.js.ListStreams(ctx, jetstream.WithStreamListSubject(filter))
	var out []TopicStream
	for info := range l.Info() {
		subs := info.Config.Subjects
		ts := TopicStream{Name: info.Config.Name, Subjects: slices.Clone(subs), Topic: ownTopic(subs)}
		if groups {
			if err := b.streamGroups(ctx, &ts); err != nil {
				return nil, err
			}
		}
		out = append(out, ts)
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("%w: list streams of %s: %w", facade.ErrUnavailable, filter, translate(err))
	}
	return out, nil
}

// streamGroups fills ts.Groups (see catalogueGroup).
func (b *Bus) streamGroups(ctx context.Context, ts *TopicStream) error {
	s, err := b.js.Stream(ctx, ts.Name)
	if err != nil {
		return fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, ts.Name, translate(err))
	}
	l := s.ListConsumers(ctx)
	for ci := range l.Info() {
		if g, ok := catalogueGroup(ts.Topic, ci.Name, consumerOf(ci.Config)); ok {
			ts.Groups = append(ts.Groups, g)
		}
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("%w: consumers of %s: %w", facade.ErrUnavailable, ts.Name, translate(err))
	}
	return nil
}
