package facade

import (
	"context"
	"encoding/json"
	"time"
)

// EventRecord is the envelope of one event. Its JSON form, with the field names
// of the specification, is what WebSocket clients receive.
//
// EventRecord is plain data: it is safe to copy and to share read-only
// between goroutines.
type EventRecord struct {
	ID        string            `json:"id"`
	SID       string            `json:"sid,omitempty"`
	TS        int64             `json:"ts"`
	Topic     string            `json:"topic"`
	Key       string            `json:"key,omitempty"`
	Partition *int              `json:"partition,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	Payload   json.RawMessage   `json:"payload"`
	CausedBy  []string          `json:"caused_by,omitempty"`
	Tags      []string          `json:"tags,omitempty"`
	// Seq is the event's position in its stream: the stream sequence on
	// JetStream. Zero when unknown.
	Seq uint64 `json:"seq,omitempty"`
}

// Time returns the event's timestamp as a time.Time.
func (e *EventRecord) Time() time.Time { return time.UnixMilli(e.TS) }

// DeliveryContext describes one delivery of an event to a handler.
type DeliveryContext struct {
	// Group is the consumer group the event is delivered to.
	Group string `json:"group"`
	// Attempt counts deliveries of this event to the group, starting at 1.
	Attempt int `json:"attempt"`
	// MaxAttempts is the subscription's limit; an event that fails on
	// attempt MaxAttempts goes to the dead-letter topic.
	MaxAttempts int `json:"maxAttempts"`
	// AckDeadline is when the group hands the event to another delivery if it
	// is neither acked nor nacked.
	AckDeadline time.Time `json:"-"`
	// Pending is how many events of the group were not yet delivered when this
	// one was, as far as the server knew.
	Pending uint64 `json:"pending"`
	// Cursor is the group's cursor as this subscription knows it: every
	// event it received up to the cursor was acknowledged (or handed back
	// to the group). It lags behind acks of other members; GetCursor is
	// the group's own.
	Cursor CursorPosition `json:"cursor"`
}

// CursorPosition is a group's position in a topic: the last event such that
// it and every event before it are acknowledged (the ack floor). An event
// acknowledged out of order does not move it past an unacknowledged one.
type CursorPosition struct {
	Topic string `json:"topic"`
	// LastID and LastTS identify the event at the cursor; empty when the
	// group has acknowledged nothing yet or the event no longer exists.
	LastID string `json:"lastId,omitempty"`
	LastTS int64  `json:"lastTs,omitempty"`
	// LastSeq is the stream position of the cursor (0: before the first event).
	LastSeq uint64 `json:"lastSeq,omitempty"`
	// Pending counts the events after the cursor that are not yet
	// acknowledged: delivered but unacked, plus not yet delivered.
	// Reported by GetCursor; ignored by SetCursor.
	Pending uint64 `json:"pending,omitempty"`
}

// Handler processes one delivered event. Returning nil acknowledges it (unless
// the subscription is ManualAck); returning an error nacks it with the error's
// text as reason. The context is cancelled when the subscription stops.
//
// Handlers of one subscription run concurrently, up to MaxInFlight at a time
// (the specification's semantics). With MaxInFlight 1 they run one at a time
// in stream order: use it where order matters, as projections do.
type Handler func(ctx context.Context, e *EventRecord, d DeliveryContext) error

// Ack is the result of an acknowledgement, as in the specification.
type Ack struct {
	ID  string `json:"id"`
	OK  bool   `json:"ok"`
	Err string `json:"err,omitempty"`
}
