package ops

import (
	"context"
	"encoding/json"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/inspect"
)

// What the endpoints need of the event bus, one role each. A
// *jetstream.Bus is a [Status] and an [ExportSource]; its admin handle
// (*jetstream.Admin) implements every role. Errors wrap the facade's
// sentinels (facade.ErrNotFound, facade.ErrUnavailable, ...).

// Status is the bus's readiness, for /healthz and /readyz.
type Status interface {
	Ready(ctx context.Context) error
	Closed() bool
}

// Topics looks topics and their streams up and changes them.
type Topics interface {
	Topic(ctx context.Context, topic string) (*inspect.Topic, error)
	StreamState(ctx context.Context, topic string) (inspect.StreamState, error)
	Streams(ctx context.Context) ([]inspect.StreamDescription, error)
	DescribeStream(ctx context.Context, topic string) (*inspect.StreamDescription, error)
	TopicCount(ctx context.Context, topic string) (uint64, error)
	DeclareTopicSettings(ctx context.Context, s inspect.TopicSettings) (stream string, created bool, err error)
	DeleteTopic(ctx context.Context, topic string) error
	Purge(ctx context.Context, topic, key string, upTo uint64) (uint64, error)
}

// Events reads, finds, deletes and republishes stored events.
type Events interface {
	Event(ctx context.Context, topic string, seq uint64) (*inspect.StoredEvent, error)
	DeleteEvent(ctx context.Context, topic string, seq uint64) error
	Scan(ctx context.Context, topic string, s inspect.Scan, fn func(e *inspect.StoredEvent) bool) (next uint64, end bool, err error)
	LatestByKey(ctx context.Context, topic string, keys []string) (map[string]*facade.EventRecord, error)
	SeqOfID(ctx context.Context, topic, id string) (uint64, error)
	SeqAtTime(ctx context.Context, topic string, t time.Time) (uint64, error)
	// PublishDerived publishes with a fresh uuidv7 id and dedupKey as
	// Nats-Msg-Id: a repeat within the duplicate window is answered with
	// the event as first stored.
	PublishDerived(ctx context.Context, topic string, payload json.RawMessage, opts facade.PublishOptions, dedupKey string) (*facade.EventRecord, error)
}

// Groups lists groups with their lag and moves, pauses, resumes and
// deletes them.
type Groups interface {
	GroupTopics(ctx context.Context) ([]string, error)
	Groups(ctx context.Context, topic string) ([]inspect.GroupInfo, error)
	GroupLag(ctx context.Context, topic, group string) (*inspect.GroupLag, error)
	SeekGroup(ctx context.Context, topic, group string, next uint64) (*inspect.GroupInfo, error)
	PauseGroup(ctx context.Context, topic, group string, until time.Time) (*inspect.GroupInfo, error)
	ResumeGroup(ctx context.Context, topic, group string) (*inspect.GroupInfo, error)
	DeleteGroup(ctx context.Context, topic, group string) error
}

// Keys deletes the events of a key (facade.KeyDeleter).
type Keys interface {
	DeleteKey(ctx context.Context, topic, key string, opts facade.DeleteOptions) (*facade.EventRecord, error)
}

// ExportSource is what an export reads: the topic, its positions and a
// replay of its events.
type ExportSource interface {
	Topic(ctx context.Context, topic string) (*inspect.Topic, error)
	StreamState(ctx context.Context, topic string) (inspect.StreamState, error)
	SeqOfID(ctx context.Context, topic, id string) (uint64, error)
	SeqAtTime(ctx context.Context, topic string, t time.Time) (uint64, error)
	NextSeq(ctx context.Context, topic, key string, from uint64) (uint64, bool, error)
	Replay(ctx context.Context, topic string, r inspect.ReplayRange, fn func(e *inspect.StoredEvent) (bool, error)) error
}
