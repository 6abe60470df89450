package outbox

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/eventhub/eventhub/facade"
)

// Record is what a service writes to the outbox: one event to publish. It is
// plain data.
type Record struct {
	// ID is the event id and the JetStream Nats-Msg-Id. Empty: a new uuidv7
	// ([facade.NewID]). 1 to 128 printable ASCII characters.
	ID string
	// Topic is the topic to publish to (see [facade.ValidateTopic]).
	Topic string
	// Key is the event key (optional; required by compacted topics).
	Key string
	// Payload is the event payload: one JSON value.
	Payload json.RawMessage
	// Headers are the event headers (optional).
	Headers map[string]string
}

// Validate checks rec the way the bus will, so that a record that can never
// be published is refused inside the caller's transaction. Errors wrap
// [facade.ErrBadTopic], [facade.ErrBadKey], [facade.ErrBadPayload] or
// [facade.ErrBadID].
func (r Record) Validate() error {
	if err := facade.ValidateTopic(r.Topic); err != nil {
		return err
	}
	if err := facade.ValidateKey(r.Key); err != nil {
		return err
	}
	if len(r.Payload) == 0 {
		return fmt.Errorf("%w: empty payload (use null for none)", facade.ErrBadPayload)
	}
	if !json.Valid(r.Payload) {
		return fmt.Errorf("%w: payload is not valid JSON", facade.ErrBadPayload)
	}
	if r.ID != "" {
		if err := validID(r.ID); err != nil {
			return err
		}
	}
	return nil
}

// validID accepts what the jetstream bus accepts as a Nats-Msg-Id.
func validID(id string) error {
	if len(id) > 128 {
		return fmt.Errorf("%w: id longer than 128 bytes", facade.ErrBadID)
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] >= 0x7f {
			return fmt.Errorf("%w: id must be printable ASCII without spaces", facade.ErrBadID)
		}
	}
	return nil
}

// Status is the state of an outbox record.
//
//	pending ──claim──▶ claimed ──publish ok──▶ sent ──Retention──▶ (deleted)
//	   ▲                  │
//	   └──retry / lease───┤
//	      expired         └──permanent error or MaxAttempts──▶ error
type Status string

// Statuses of an outbox record.
const (
	// StatusPending: waiting to be published (from NextAttemptAt on).
	StatusPending Status = "pending"
	// StatusClaimed: a drainer holds it until LeaseUntil.
	StatusClaimed Status = "claimed"
	// StatusSent: published and acknowledged by the event store.
	StatusSent Status = "sent"
	// StatusError: parked after a permanent error or MaxAttempts failed
	// attempts; LastErr says why. [Store.RetryFailed] makes it pending again.
	StatusError Status = "error"
)

// Entry is a stored outbox record with its delivery state. It is plain data.
type Entry struct {
	Record
	Status Status
	// Attempts counts the claims of the record that ended in a publish
	// failure, a publish in flight, or a lost drainer. Claims that found the
	// event store unavailable are not counted.
	Attempts int
	// LastErr is the last failure, empty if none.
	LastErr string
	// ClaimedBy is the worker that holds (or last sent or parked) the record.
	ClaimedBy string
	// LeaseUntil is when a claim expires; zero when not claimed.
	LeaseUntil time.Time
	// CreatedAt is when the record was added (the database's clock); the
	// event's timestamp is taken from it.
	CreatedAt time.Time
	// NextAttemptAt is when a pending record may be claimed next.
	NextAttemptAt time.Time
	// SentAt is when the record was marked sent; zero when not sent.
	SentAt time.Time
}

// publishOptions returns the publish options of an entry: its id becomes the
// Nats-Msg-Id, its creation time the event's timestamp.
func (e *Entry) publishOptions() facade.PublishOptions {
	return facade.PublishOptions{
		ID:      e.ID,
		TS:      e.CreatedAt.UnixMilli(),
		Key:     e.Key,
		Headers: e.Headers,
	}
}

// dbTime scans a timestamp stored either as a PostgreSQL timestamptz or as
// SQLite integer milliseconds since the Unix epoch. NULL is the zero time.
type dbTime struct{ t *time.Time }

func (d dbTime) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*d.t = time.Time{}
	case time.Time:
		*d.t = x
	case int64:
		*d.t = time.UnixMilli(x)
	case float64:
		*d.t = time.UnixMilli(int64(x))
	default:
		return fmt.Errorf("outbox: cannot scan %T into a time", v)
	}
	return nil
}

// claimRefs returns the JSON that names claims in the fenced statements: a
// claim is identified by who holds it (claimed_by) and by the attempt number
// its claim set. PostgreSQL reads an object {"id": attempts, ...}, SQLite an
// array of [id, attempts] pairs.
func claimRefs(d Dialect, entries []*Entry) (string, error) {
	var v any
	if d == Postgres {
		m := make(map[string]int, len(entries))
		for _, e := range entries {
			m[e.ID] = e.Attempts
		}
		v = m
	} else {
		refs := make([][2]any, len(entries))
		for i, e := range entries {
			refs[i] = [2]any{e.ID, e.Attempts}
		}
		v = refs
	}
	b, err := json.Marshal(v)
	return string(b), err
}
