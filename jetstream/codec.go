package jetstream

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/jsonvalid"
)

// Header names of the envelope fields (see docs/nats.md, Interoperability). The payload is
// the message data; the key is in the subject.
//
// Publishes that may be made twice carry their id in HeaderID and in
// HeaderMsgID, JetStream's duplicate-detection header: a caller-supplied id
// (a retry by the caller is the same event), and a publish the hub itself
// may retry (see [Bus.Publish]). Every other publish gets its id from the
// hub and carries none: it can never be a duplicate, so it skips the
// server's duplicate tracking, the largest cost of a publish, and its id
// is [PosID] of its topic, HeaderTS and stream sequence, which the hub
// derives from the store's acknowledgement and every reader from the
// message, so that it costs no header either. Readers take the id from
// HeaderID, then HeaderMsgID (a plain NATS publisher may set either), then
// derive it from HeaderTS and the stream position, and otherwise from the
// stored time and the stream position.
const (
	HeaderID        = "Eventhub-Id"
	HeaderMsgID     = nats.MsgIdHdr // "Nats-Msg-Id"
	HeaderTS        = "Eventhub-Ts"
	HeaderSID       = "Eventhub-Sid"
	HeaderPartition = "Eventhub-Partition"
	HeaderHeaders   = "Eventhub-Headers"
	HeaderTags      = "Eventhub-Tags"
	HeaderCausedBy  = "Eventhub-Caused-By"
)

// newRecord validates a publish and builds its record, without an id
// unless the caller chose one.
func newRecord(topic string, payload json.RawMessage, o *facade.PublishOptions) (*facade.EventRecord, error) {
	if err := facade.ValidateTopic(topic); err != nil {
		return nil, err
	}
	if len(payload) == 0 {
		return nil, fmt.Errorf("%w: empty payload (use null for none)", facade.ErrBadPayload)
	}
	if !jsonvalid.Valid(payload) {
		return nil, fmt.Errorf("%w: %s", facade.ErrBadPayload, payloadHint(payload))
	}
	if !utf8.Valid(payload) {
		// Browsers fail a WebSocket on a text frame that is not UTF-8:
		// such an event could never be delivered to them.
		return nil, fmt.Errorf("%w: payload is not valid UTF-8", facade.ErrBadPayload)
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	id := o.ID // "": the publish gives it one (see Bus.prepare)
	if id != "" {
		if err := validID(id); err != nil {
			return nil, err
		}
	}
	ts := o.TS
	if ts == 0 {
		ts = time.Now().UnixMilli()
	}
	return &facade.EventRecord{
		ID: id, SID: o.SID, TS: ts, Topic: topic, Key: o.Key, Partition: o.Partition,
		Headers: o.Headers, Payload: payload, CausedBy: o.CausedBy, Tags: o.Tags,
	}, nil
}

// validID accepts ids that are safe as a Nats-Msg-Id: 1 to 128 printable
// ASCII characters. uuidv7 ids are what the hub makes and what afterId can
// find; other ids are stored but can only be found by sequence.
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

func payloadHint(p []byte) string {
	var v any
	err := json.Unmarshal(p, &v)
	if err == nil {
		return "not a single JSON value"
	}
	return err.Error()
}

// toMsg builds the NATS message of a record; idempotent adds the id as
// HeaderMsgID, so that JetStream stores the event once however often it is
// sent within the stream's duplicate window. A record without an id gets
// none in the message: its id is PosID of the position it is stored at.
func toMsg(subject string, e *facade.EventRecord, idempotent bool) (*nats.Msg, error) {
	h := make(nats.Header, 4)
	// The values of the usual headers share one backing array: a publish
	// allocates once for them, not once per header.
	vals := make([]string, 0, 5)
	set := func(name, v string) {
		vals = append(vals, v)
		h[name] = vals[len(vals)-1 : len(vals) : len(vals)] // capped: an Add copies
	}
	if e.ID != "" {
		set(HeaderID, e.ID)
	}
	if idempotent {
		set(HeaderMsgID, e.ID)
	}
	set(HeaderTS, strconv.FormatInt(e.TS, 10))
	if e.SID != "" {
		set(HeaderSID, e.SID)
	}
	if e.Partition != nil {
		set(HeaderPartition, strconv.Itoa(*e.Partition))
	}
	if len(e.Headers) > 0 {
		if err := setJSONHeader(h, HeaderHeaders, e.Headers); err != nil {
			return nil, err
		}
	}
	if len(e.Tags) > 0 {
		if err := setJSONHeader(h, HeaderTags, e.Tags); err != nil {
			return nil, err
		}
	}
	if len(e.CausedBy) > 0 {
		if err := setJSONHeader(h, HeaderCausedBy, e.CausedBy); err != nil {
			return nil, err
		}
	}
	return &nats.Msg{Subject: subject, Header: h, Data: e.Payload}, nil
}

// fromMsg decodes a stored message into a record. A message with a time
// (HeaderTS) but no id gets PosID (how the hub publishes an id it makes);
// messages published by plain NATS clients without envelope headers get a
// synthesised id and the stored time;
// a non-JSON body becomes a JSON string (base64 for bytes that are not UTF-8,
// marked by the header "content-transfer-encoding: base64").
//
// What the hub would refuse to write is read back in a defined shape: a
// key token outside the key encoding ("%ZZ") is the key as it stands, so
// the event stays its topic's; an id that is not 1 to 128 printable ASCII
// characters, or a time that is not epoch milliseconds, is replaced as for
// a message without one.
func fromMsg(subject string, h nats.Header, data []byte, seq uint64, stored time.Time) *facade.EventRecord {
	topic, key := topicKey(subject)
	e := &facade.EventRecord{Topic: topic, Key: key, Seq: seq}
	if h != nil {
		if e.ID = msgID(h); validID(e.ID) != nil {
			e.ID = ""
		}
		if ts, err := strconv.ParseInt(h.Get(HeaderTS), 10, 64); err == nil && ts > 0 {
			e.TS = ts
		}
		if !onlyIDAndTime(h) {
			data = readOptional(e, h, data)
		}
	}
	if e.ID == "" {
		if e.TS != 0 {
			e.ID = PosID(topic, e.TS, seq)
		} else {
			e.ID = synthID(stored, seq)
		}
	}
	if e.TS == 0 {
		e.TS = stored.UnixMilli()
	}
	// Validated again on the way out: a plain NATS client can store
	// anything, envelope headers included, and WebSocket frames embed the
	// payload as it is.
	e.Payload = foreignPayload(data, e)
	return e
}

// onlyIDAndTime reports whether h holds no header but the id and the
// time, as most events do (a fresh publish carries the time alone): then
// there is nothing else to look up.
func onlyIDAndTime(h nats.Header) bool {
	n := 0
	if h[HeaderID] != nil {
		n++
	}
	if h[HeaderTS] != nil {
		n++
	}
	return len(h) == n
}

// readOptional reads the envelope's optional headers into e; the data
// that is its payload (nil for a tombstone).
func readOptional(e *facade.EventRecord, h nats.Header, data []byte) []byte {
	e.SID = h.Get(HeaderSID)
	if p := h.Get(HeaderPartition); p != "" {
		if n, err := strconv.Atoi(p); err == nil {
			e.Partition = &n
		}
	}
	if v := h.Get(HeaderHeaders); v != "" {
		_ = json.Unmarshal([]byte(v), &e.Headers)
	}
	if v := h.Get(HeaderTags); v != "" {
		_ = json.Unmarshal([]byte(v), &e.Tags)
	}
	if v := h.Get(HeaderCausedBy); v != "" {
		_ = json.Unmarshal([]byte(v), &e.CausedBy)
	}
	e.Trace = traceFrom(h)
	if isTombstone(h) {
		e.Deleted = true
		data = nil // a tombstone's payload is null
	}
	return data
}

// topicKey splits a stored subject into the topic and key of its event.
func topicKey(subject string) (topic, key string) {
	topic, key = splitSubject(subject)
	if key == "" || !utf8.ValidString(key) {
		topic, key = foreignKey(subject)
	}
	return topic, key
}

// foreignKey splits a keyed subject whose key token is not in the key
// encoding (see EncodeKey) into its topic and the token as it stands, made
// valid UTF-8; a subject outside the keyed layout is its own topic.
func foreignKey(subject string) (topic, key string) {
	i := strings.Index(subject, "."+keyMarker+".")
	if i < 0 {
		return subject, ""
	}
	tok := subject[i+len(keyMarker)+2:]
	if tok == "" || strings.Contains(tok, ".") {
		return subject, ""
	}
	return subject[:i], strings.ToValidUTF8(tok, "\uFFFD")
}

// msgID returns the event id a message carries in its headers: HeaderID,
// else HeaderMsgID; "" when it has neither.
func msgID(h nats.Header) string {
	if id := h.Get(HeaderID); id != "" {
		return id
	}
	return h.Get(HeaderMsgID)
}

// idOf returns the event id of a stored message as fromMsg reads it.
func idOf(subject string, h nats.Header, seq uint64, stored time.Time) string {
	if id := msgID(h); id != "" && validID(id) == nil {
		return id
	}
	if ts, err := strconv.ParseInt(h.Get(HeaderTS), 10, 64); err == nil && ts > 0 {
		topic, _ := topicKey(subject)
		return PosID(topic, ts, seq)
	}
	return synthID(stored, seq)
}

func foreignPayload(data []byte, e *facade.EventRecord) json.RawMessage {
	if len(data) > 0 && jsonvalid.Valid(data) && utf8.Valid(data) {
		return data
	}
	if len(data) == 0 {
		return json.RawMessage("null")
	}
	if b, err := json.Marshal(string(data)); err == nil && utf8.Valid(data) {
		return b
	}
	b, _ := json.Marshal(data) // []byte marshals as base64
	if e.Headers == nil {
		e.Headers = map[string]string{}
	}
	e.Headers["content-transfer-encoding"] = "base64"
	return b
}

func setJSONHeader(h nats.Header, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", facade.ErrInvalidOption, name, err)
	}
	h[name] = []string{string(b)}
	return nil
}
