package hub

import (
	"context"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/jetstream"
)

// busDirectory shows native-client authentication the bus's streams (from
// the catalogue the bus keeps in memory, so a connect costs no JetStream
// API call) and consumer names.
type busDirectory struct {
	bus       *jetstream.Bus
	catalogue *jetstream.Catalogue
}

var _ auth.Directory = busDirectory{}

func (d busDirectory) TopicStreams(ctx context.Context, filter string, groups bool) ([]auth.Stream, error) {
	ss, err := d.catalogue.TopicStreams(ctx, filter, groups)
	if err != nil {
		return nil, err
	}
	out := make([]auth.Stream, len(ss))
	for i, s := range ss {
		out[i] = auth.Stream{Name: s.Name, Topic: s.Topic, Subjects: s.Subjects}
		for _, g := range s.Groups {
			out[i].Groups = append(out[i].Groups, auth.GroupConsumer{Consumer: g.Consumer, Topic: g.Topic, Group: g.Group})
		}
	}
	return out, nil
}

func (d busDirectory) StreamNameFor(topic string) (string, bool) { return d.bus.StreamNameFor(topic) }

func (d busDirectory) ConsumerName(group, topic string, shared bool) string {
	return jetstream.ConsumerName(group, topic, shared)
}
