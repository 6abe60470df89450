package facade

import (
	"encoding/json"
	"time"
)

// EventRecord is the envelope of one event. Its JSON form, with the field names
// of the reference TypeScript clients, is what WebSocket clients receive.
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
	// Deleted marks the tombstone of a key (see [KeyDeleter]): from it on
	// the key has no value. Its Payload is null.
	Deleted bool `json:"deleted,omitempty"`
	// Trace is the W3C trace context the event carries to its reader, nil
	// when it has none: for a delivery to a group, the context of the
	// hub's deliver span when the hub traces, else the one the event was
	// published with. It is not part of the record's JSON: the WebSocket
	// protocol carries it in an EVENT frame's ctx.
	Trace *TraceContext `json:"-"`
}

// Time returns the event's timestamp as a time.Time.
func (e *EventRecord) Time() time.Time { return time.UnixMilli(e.TS) }

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
