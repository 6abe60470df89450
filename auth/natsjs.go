package auth

import (
	"context"

	"github.com/eventhub/eventhub/auth/natsgrant"
)

// Directory tells native-client authentication where topics live, so that
// it can grant JetStream API subjects by stream and consumer name. The hub's
// bus implements it (hub wires it with [NATS.SetDirectory]).
type Directory interface {
	// TopicStreams lists the streams whose subjects overlap filter (a NATS
	// subject, wildcards allowed); with groups, the groups on each too.
	TopicStreams(ctx context.Context, filter string, groups bool) ([]Stream, error)
	// StreamNameFor is the stream the hub would create for topic; shared
	// is true for a configured family stream.
	StreamNameFor(topic string) (name string, shared bool)
	// ConsumerName is the durable consumer of group on topic, on the
	// topic's own stream or on a shared one.
	ConsumerName(group, topic string, shared bool) string
}

// Stream is a stream that holds topics (see natsgrant.Stream).
type Stream = natsgrant.Stream

// GroupConsumer is the consumer of a group (see natsgrant.GroupConsumer).
type GroupConsumer = natsgrant.GroupConsumer

// jsAPI is the JetStream API's subject prefix.
const jsAPI = "$JS.API."
