// Package inspect holds what the event bus reports about its topics,
// streams and groups, and what an operator asks of them, as plain values:
// the ops endpoints and the admin API read them without depending on the
// NATS client. Every type is a snapshot, never updated, safe to share.
package inspect

import (
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/wire"
)

// MaxListedTopics bounds the topics a [StreamDescription] lists for one
// family stream.
const MaxListedTopics = 1000

// ErrBadSettings is wrapped by the errors of topic settings that are not
// valid ([TopicSettings]); its code is "bad_request".
var ErrBadSettings = &facade.Error{Code: wire.CodeBadRequest, Msg: "bad request"}

// Topic is where a topic is stored: its stream and the stream's settings
// at lookup.
type Topic struct {
	// Topic is the topic name; StreamName the stream that captures it.
	Topic      string
	StreamName string
	// Filters are the subjects of the topic in the stream: the topic
	// itself and, when the stream captures them, its keyed subjects.
	Filters []string
	// Keyed: the stream captures the topic's keyed subjects.
	Keyed bool
	// Compacted: the stream keeps one event per subject.
	Compacted bool
	// Shared: the stream holds other topics too (a configured family
	// stream or an operator-made stream).
	Shared bool
	// MaxAge, MaxBytes and DuplicateWindow are the stream's limits (0:
	// unlimited).
	MaxAge          time.Duration
	MaxBytes        int64
	DuplicateWindow time.Duration
}

// StreamState is how much a topic's stream holds now.
type StreamState struct {
	Messages, Bytes   uint64
	FirstSeq, LastSeq uint64
}

// StoredEvent is one stored message: the event as subscribers get it, and
// what the stream holds around it.
type StoredEvent struct {
	Event   *facade.EventRecord
	Subject string
	// Headers are the message's headers as stored (nil: none).
	Headers map[string][]string
	// Stored is when the stream stored the message.
	Stored time.Time
}

// Scan selects the messages of a topic that one scan reads, in order.
type Scan struct {
	// Key, when set, reads only the events of this key; empty reads all of
	// the topic's events.
	Key string
	// From is the first stream sequence to read (0: 1).
	From uint64
	// Max bounds the messages read.
	Max int
	// HeadersOnly reads the messages without their payloads.
	HeadersOnly bool
}

// ReplayRange is a range of a topic that a replay reads, in order.
type ReplayRange struct {
	// Key, when set, reads only the events of this key.
	Key string
	// From and To are the first and the last stream sequence, inclusive.
	From, To uint64
	// Batch is how many messages the replay's consumer buffers.
	Batch int
	// StallWait is how long the replay waits for the next message before
	// it checks whether events of the range are still there (they can
	// vanish under it: retention limits, deletes).
	StallWait time.Duration
}

// TopicSettings are the settings of a topic's own stream that an operator
// declares: retention, size limit, duplicate window, compaction and, on
// create, storage and replicas. Zero values mean the defaults.
type TopicSettings struct {
	Topic           string
	MaxAge          time.Duration
	MaxBytes        int64
	DuplicateWindow time.Duration
	Compaction      bool
	// Storage is "file" or "memory"; Replicas 1, 3 or 5.
	Storage  string
	Replicas int
}

// GroupInfo is a group of a topic as the server reports it. It is a
// snapshot: never updated, safe to share.
type GroupInfo struct {
	// Group is the group's name; Consumer the name of its durable consumer.
	Group    string
	Consumer string
	// Cursor is the group's ack floor: every event up to it is
	// acknowledged. Its LastID and LastTS are empty when nothing is
	// acknowledged or that event is gone.
	Cursor facade.CursorPosition
	// DeliveredSeq is the stream sequence last delivered.
	DeliveredSeq uint64
	// Pending: events not yet delivered; AckPending: delivered and not yet
	// settled (in flight); Lag = Pending + AckPending.
	Pending     uint64
	AckPending  int
	Lag         uint64
	Redelivered int
	// Waiting counts the members' pull requests waiting for events.
	Waiting int
	// Paused: the group is paused; PauseRemaining is how long for.
	Paused         bool
	PauseRemaining time.Duration
	// LastActive is when the group last had an event delivered (zero:
	// never).
	LastActive time.Time
	// Filters are the subjects the group reads: its consumer's filter
	// subjects, or the topic's when it has none.
	Filters []string
	// Retry is the group's retry policy (defaults applied); RetryDefault
	// says the group set none and follows the bus's default.
	Retry        facade.RetryPolicy
	RetryDefault bool
	// OrderBy is the group's order: facade.OrderByKey, or "" (unordered).
	OrderBy string
}

// GroupLag is a group with the oldest event it has not acknowledged and
// the stream's tail.
type GroupLag struct {
	GroupInfo
	// Oldest is the topic's first event after the cursor; nil when Lag is
	// 0 or it could not be read. OldestStored is when the stream stored it.
	Oldest       *facade.EventRecord
	OldestStored time.Time
	// StreamLastSeq and StreamLastTime: the stream's last event.
	StreamLastSeq  uint64
	StreamLastTime time.Time
}

// StreamDescription is a stream that holds topics: its configuration,
// state, topics and groups. It is a snapshot.
type StreamDescription struct {
	Name     string
	Subjects []string
	// Topics are the topics the stream holds: its literal subjects, the
	// topics a family stream has events of, and the topics of its groups;
	// sorted, at most [MaxListedTopics] (TopicsTruncated when there are
	// more).
	Topics          []string
	TopicsTruncated bool
	Messages        uint64
	Bytes           uint64
	FirstSeq        uint64
	FirstTime       time.Time
	LastSeq         uint64
	LastTime        time.Time
	MaxAge          time.Duration
	MaxBytes        int64
	// Compaction: the stream keeps one event per subject.
	Compaction bool
	// Storage is "file" or "memory".
	Storage   string
	Replicas  int
	Consumers int
	// Groups are the consumers with acks on the stream (ordered consumers
	// and replays are not groups), sorted by topic and group.
	Groups      []GroupConsumer
	Description string
}

// GroupConsumer is the durable consumer of a hub group.
type GroupConsumer struct {
	Consumer string
	Topic    string
	Group    string
}
