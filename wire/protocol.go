package wire

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/eventjson"
)

// ProtocolVersion is the version of the protocol this package speaks,
// "major.minor": the minor grows when ops or fields are added (a client that
// does not know them keeps working), the major when a change is not
// compatible. The reference browser client's package (web/static/package.json)
// carries it as its major.minor version.
const ProtocolVersion = "1.1"

// Ops of the protocol.
const (
	OpAuth        = "AUTH"
	OpOK          = "OK"
	OpErr         = "ERR"
	OpSubscribe   = "SUBSCRIBE"
	OpUnsubscribe = "UNSUBSCRIBE"
	OpPublish     = "PUBLISH"
	OpEvent       = "EVENT"
	OpAck         = "ACK"
	OpNack        = "NACK"
	OpModAck      = "MODACK"
	OpCursor      = "CURSOR"
	OpSeek        = "SEEK"
	OpDelete      = "DELETE"
)

// OpInfo describes one op.
type OpInfo struct {
	Op string
	// FromClient: the client sends it (else the server does).
	FromClient bool
	// Extension: an op the reference TypeScript clients do not send.
	Extension bool
}

// ops is the op table, read only.
var ops = []OpInfo{
	{OpAuth, true, false},
	{OpOK, false, false},
	{OpErr, false, false},
	{OpSubscribe, true, false},
	{OpUnsubscribe, true, false},
	{OpPublish, true, false},
	{OpEvent, false, false},
	{OpAck, true, false},
	{OpNack, true, false},
	{OpModAck, true, false},
	{OpCursor, true, true},
	{OpSeek, true, true},
	{OpDelete, true, true},
}

// Ops returns a copy of the op table. It is safe for concurrent use.
func Ops() []OpInfo { return slices.Clone(ops) }

// LookupOp returns the table entry of op; false for an op the protocol
// does not have.
func LookupOp(op string) (OpInfo, bool) {
	for _, o := range ops {
		if o.Op == op {
			return o, true
		}
	}
	return OpInfo{}, false
}

// Frame is every frame of the protocol: one JSON object per WebSocket text
// message, with the fields its op uses. The field order is the order of the
// encoded JSON.
type Frame struct {
	Op   string `json:"op"`
	Corr string `json:"corr,omitempty"`
	// AUTH
	Token string `json:"token,omitempty"`
	// AUTH (extension): ask for batched frames (see [SplitBatch]).
	Batch bool `json:"batch,omitempty"`
	// SUBSCRIBE, UNSUBSCRIBE, PUBLISH, EVENT, ACK, NACK, MODACK, CURSOR, SEEK
	Topic string `json:"topic,omitempty"`
	Group string `json:"group,omitempty"`
	// DELETE (extension): the key to delete.
	Key string `json:"key,omitempty"`
	// ACK, NACK, MODACK; OK of PUBLISH (the new event's id)
	ID string `json:"id,omitempty"`
	// OK of PUBLISH (extension): the event's stream position and time.
	// OK of a live SUBSCRIBE: the position its live events continue after.
	Seq uint64 `json:"seq,omitempty"`
	TS  int64  `json:"ts,omitempty"`
	// OK of a live SUBSCRIBE with since or snapshot: whether everything
	// after the position was sent, and if not, the oldest position the
	// stream still holds.
	Recovered *bool  `json:"recovered,omitempty"`
	First     uint64 `json:"first,omitempty"`
	// ACK, NACK, MODACK (extension): when set, the frame applies only to
	// this attempt of the event (a stale frame gets unknown_id).
	Attempt int `json:"attempt,omitempty"`
	// NACK
	Reason string `json:"reason,omitempty"`
	// MODACK
	ExtendMs int64 `json:"extend_ms,omitempty"`
	// PUBLISH
	Payload json.RawMessage `json:"payload,omitempty"`
	// PUBLISH (extension): the W3C trace context the event is published
	// under; the hub's publish span continues it.
	Trace *facade.TraceContext `json:"trace,omitempty"`
	// SUBSCRIBE (facade.SubscribeOptions), PUBLISH (facade.PublishOptions),
	// DELETE (facade.DeleteOptions)
	Opts json.RawMessage `json:"opts,omitempty"`
	// SEEK; OK of CURSOR
	Cursor *facade.CursorPosition `json:"cursor,omitempty"`
	// ERR
	Code string `json:"code,omitempty"`
	Msg  string `json:"msg,omitempty"`
	// ERR rate_limited: milliseconds to wait before the request would pass.
	RetryAfterMs int64 `json:"retry_after_ms,omitempty"`
	// EVENT
	Event *facade.EventRecord `json:"event,omitempty"`
	Ctx   *EventContext       `json:"ctx,omitempty"`
}

// EventContext is the ctx of an EVENT frame: of a group's, its attempt,
// lease and trace context; of a live subscription's, its trace context,
// when it has one (else a live EVENT has no ctx).
type EventContext struct {
	// Attempt counts deliveries of the event to the group, from 1.
	Attempt int `json:"attempt,omitempty"`
	// AckDeadlineMs is the lease: milliseconds left to ACK, NACK or MODACK.
	AckDeadlineMs int64 `json:"ack_deadline_ms,omitempty"`
	// Trace (extension) is the W3C trace context the event carries
	// ([facade.EventRecord.Trace]); absent when it has none.
	Trace *facade.TraceContext `json:"trace,omitempty"`
}

// Decode parses one client or server frame into f, which it resets first.
// Field names are exact: a duplicate key, or one that differs from a field's
// name only in case, is bad_frame. Errors are *facade.Error with code
// bad_json (not JSON), bad_frame (not an object, no op, a field of the wrong
// type, inexact names), unknown_op, or, for bytes that are not UTF-8,
// bad_payload (in the payload), bad_key (in opts.key) or bad_request
// (elsewhere). On the codes after bad_json, f.Corr is still set when the
// frame had a valid string corr, so the ERR can echo it. The decoded frame
// does not alias data.
func Decode(data []byte, f *Frame) error {
	return decode(data, f, nil, nil, nil)
}

// Decoder is [Decode] for the frames of one connection, which name the
// same few topics and groups over and over: it hands out the strings of
// the names it met in the last frames again instead of allocating new
// ones. The zero value is ready to use; a Decoder is not safe for
// concurrent use.
type Decoder struct {
	names [8]string
	next  int
}

// Decode is [Decode].
func (d *Decoder) Decode(data []byte, f *Frame) error {
	return decode(data, f, d, nil, nil)
}

// DecodeEvent is [Decoder.Decode] that, for an EVENT frame, decodes the
// event into e and its ctx (when it has one) into c, which it resets
// first, and points f.Event and f.Ctx at them: the caller allocates them
// together with what else it keeps per event.
func (d *Decoder) DecodeEvent(data []byte, f *Frame, e *facade.EventRecord, c *EventContext) error {
	return decode(data, f, d, e, c)
}

// name returns the string of b: one the decoder holds, or a new one it
// then holds.
func (d *Decoder) name(b []byte) string {
	if d == nil {
		return string(b)
	}
	for _, s := range d.names {
		if s == string(b) {
			return s
		}
	}
	s := string(b)
	d.names[d.next] = s
	d.next = (d.next + 1) % len(d.names)
	return s
}

func (d *Decoder) nameField(data []byte, i int) (string, int, bool) {
	a, b, ok := plainString(data, i)
	if !ok {
		return "", 0, false
	}
	return d.name(data[a:b]), b + 1, true
}

func decode(data []byte, f *Frame, d *Decoder, e *facade.EventRecord, c *EventContext) error {
	*f = Frame{}
	ok := decodeEvent(data, f, d, e, c)
	if !ok {
		*f = Frame{}
		ok = decodeFlat(data, f, d)
	}
	if !ok {
		*f = Frame{}
		if err := decodeJSON(data, f); err != nil {
			return err
		}
		if err := strictKeys(data, frameSchema, ""); err != nil {
			return err
		}
		if err := checkUTF8(data, f); err != nil {
			return err
		}
		if e != nil && f.Event != nil {
			*e = *f.Event
			f.Event = e
		}
		if c != nil && f.Ctx != nil {
			*c = *f.Ctx
			f.Ctx = c
		}
	}
	if f.Op == "" {
		return Errorf(CodeBadFrame, "missing op")
	}
	if _, ok := LookupOp(f.Op); !ok {
		return Errorf(CodeUnknownOp, "unknown op %q", truncateString(f.Op, 64))
	}
	return nil
}

// decodeJSON is the general decoder (encoding/json). It decodes into a
// frame of its own, so that f (often on its caller's stack) does not have
// to live on the heap because encoding/json might keep it.
func decodeJSON(data []byte, f *Frame) error {
	g := new(Frame)
	defer func() { *f = *g }()
	if err := json.Unmarshal(data, g); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				return Errorf(CodeBadFrame, "a frame is a JSON object, not %s", te.Value)
			}
			return Errorf(CodeBadFrame, "field %s: want %s, not %s", field, te.Type, te.Value)
		}
		return Errorf(CodeBadJSON, "%s", err.Error())
	}
	return nil
}

// The fast decoders below handle the frames of the hot path (ACK, NACK,
// MODACK from clients; EVENT, OK, ERR from the gateway) in the exact,
// compact shape the Append functions write, without reflection. Anything
// else (whitespace, escapes, non-ASCII strings, unknown fields, other
// shapes) makes them report false, and Decode falls back to encoding/json;
// FuzzDecode checks that both give the same frame.

// decodeFlat decodes an object of plain strings and integers, keys in any
// order.
func decodeFlat(data []byte, f *Frame, d *Decoder) bool {
	n := len(data)
	if n < 2 || data[0] != '{' || data[n-1] != '}' || data[1] == '}' {
		return false
	}
	i := 1
	var seen uint32 // keys met so far, by their place in flatKeys
	for {
		ka, kb, ok := plainString(data, i)
		if !ok || kb+1 >= n || data[kb+1] != ':' {
			return false
		}
		i = kb + 2
		k := flatKeyBit(data[ka:kb])
		if k == 0 || seen&k != 0 {
			return false // unknown or duplicate: the general decoder decides
		}
		seen |= k
		switch string(data[ka:kb]) {
		case "op":
			f.Op, i, ok = opField(data, i)
		case "corr":
			f.Corr, i, ok = stringField(data, i)
		case "token":
			f.Token, i, ok = stringField(data, i)
		case "topic":
			f.Topic, i, ok = d.nameField(data, i)
		case "group":
			f.Group, i, ok = d.nameField(data, i)
		case "id":
			f.ID, i, ok = stringField(data, i)
		case "reason":
			f.Reason, i, ok = stringField(data, i)
		case "code":
			f.Code, i, ok = stringField(data, i)
		case "msg":
			f.Msg, i, ok = stringField(data, i)
		case "ts":
			f.TS, i, ok = intField(data, i)
		case "extend_ms":
			f.ExtendMs, i, ok = intField(data, i)
		case "attempt":
			var v int64
			v, i, ok = intField(data, i)
			f.Attempt = int(v)
		case "seq":
			if i < n && data[i] == '-' {
				return false // not a uint64, even -0
			}
			var v int64
			v, i, ok = intField(data, i)
			f.Seq = uint64(v)
		default:
			return false
		}
		if !ok || i >= n {
			return false
		}
		switch data[i] {
		case ',':
			i++
		case '}':
			return i == n-1
		default:
			return false
		}
	}
}

// flatKeys are the keys decodeFlat handles.
var flatKeys = [...]string{"op", "corr", "token", "topic", "group", "id", "reason", "code", "msg", "ts", "extend_ms", "attempt", "seq"}

// flatKeyBit is k's bit in decodeFlat's set of keys met, 0 if it handles
// no such key.
func flatKeyBit(k []byte) uint32 {
	for i, name := range flatKeys {
		if string(k) == name {
			return 1 << i
		}
	}
	return 0
}

// plainString finds the string starting at data[i]: its content is
// data[a:b] and data[b] is the closing quote. Strings with escapes, control
// characters or non-ASCII bytes are not plain.
func plainString(data []byte, i int) (a, b int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return 0, 0, false
	}
	j := i + 1
	for j < len(data) && plainByte[data[j]] {
		j++
	}
	if j < len(data) && data[j] == '"' {
		return i + 1, j, true
	}
	return 0, 0, false
}

func stringField(data []byte, i int) (string, int, bool) {
	a, b, ok := plainString(data, i)
	if !ok {
		return "", 0, false
	}
	return string(data[a:b]), b + 1, true
}

// opField is stringField for an op: the protocol's ops are not allocated
// again.
func opField(data []byte, i int) (string, int, bool) {
	a, b, ok := plainString(data, i)
	if !ok {
		return "", 0, false
	}
	if o, ok := LookupOp(string(data[a:b])); ok {
		return o.Op, b + 1, true
	}
	return string(data[a:b]), b + 1, true
}

// intField parses a JSON integer (no fraction or exponent, at most 18
// digits) at data[i].
func intField(data []byte, i int) (int64, int, bool) {
	neg := false
	if i < len(data) && data[i] == '-' {
		neg = true
		i++
	}
	start := i
	var v int64
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		v = v*10 + int64(data[i]-'0')
		i++
	}
	d := i - start
	if d == 0 || d > 18 || (d > 1 && data[start] == '0') {
		return 0, 0, false
	}
	if i < len(data) && (data[i] == '.' || data[i] == 'e' || data[i] == 'E') {
		return 0, 0, false
	}
	if neg {
		v = -v
	}
	return v, i, true
}

// expect reports whether data[i:] starts with lit, and the index after it.
func expect(data []byte, i int, lit string) (int, bool) {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// decodeEvent decodes an EVENT frame in the layout of AppendEvent, or of
// AppendLiveEvent (no group, no ctx), into e and c when they are not nil
// (else new ones). Its topic and group come from d.
func decodeEvent(data []byte, f *Frame, d *Decoder, e *facade.EventRecord, c *EventContext) bool {
	i, ok := expect(data, 0, `{"op":"EVENT","topic":`)
	if !ok {
		return false
	}
	f.Op = OpEvent
	if f.Topic, i, ok = d.nameField(data, i); !ok {
		return false
	}
	live := true
	if j, ok := expect(data, i, `,"group":`); ok {
		live = false
		if f.Group, i, ok = d.nameField(data, j); !ok {
			return false
		}
	}
	if i, ok = expect(data, i, `,"event":{"id":`); !ok {
		return false
	}
	if e == nil {
		e = new(facade.EventRecord)
	} else {
		*e = facade.EventRecord{}
	}
	f.Event = e
	if e.ID, i, ok = stringField(data, i); !ok {
		return false
	}
	if j, ok := expect(data, i, `,"sid":`); ok {
		if e.SID, i, ok = stringField(data, j); !ok {
			return false
		}
	}
	if i, ok = expect(data, i, `,"ts":`); !ok {
		return false
	}
	if e.TS, i, ok = intField(data, i); !ok {
		return false
	}
	if i, ok = expect(data, i, `,"topic":`); !ok {
		return false
	}
	// The event's topic is the frame's but for wildcard subscriptions:
	// share the string then.
	a, b, ok := plainString(data, i)
	if !ok {
		return false
	}
	if e.Topic, i = f.Topic, b+1; string(data[a:b]) != f.Topic {
		e.Topic = d.name(data[a:b])
	}
	if j, ok := expect(data, i, `,"key":`); ok {
		if e.Key, i, ok = stringField(data, j); !ok {
			return false
		}
	}
	if j, ok := expect(data, i, `,"partition":`); ok {
		var p int64
		if p, i, ok = intField(data, j); !ok {
			return false
		}
		pi := int(p)
		e.Partition = &pi
	}
	if j, ok := expect(data, i, `,"headers":{`); ok {
		e.Headers = make(map[string]string)
		i = j
		for first := true; ; first = false {
			if j, ok := expect(data, i, "}"); ok {
				i = j
				break
			}
			if !first {
				if i, ok = expect(data, i, ","); !ok {
					return false
				}
			}
			var k, v string
			if k, i, ok = stringField(data, i); !ok {
				return false
			}
			if i, ok = expect(data, i, ":"); !ok {
				return false
			}
			if v, i, ok = stringField(data, i); !ok {
				return false
			}
			e.Headers[k] = v
		}
	}
	if i, ok = expect(data, i, `,"payload":`); !ok {
		return false
	}
	end, ok := scanValue(data, i)
	if !ok {
		return false
	}
	e.Payload = append(json.RawMessage(nil), data[i:end]...)
	i = end
	if j, ok := expect(data, i, `,"caused_by":`); ok {
		if e.CausedBy, i, ok = stringArray(data, j); !ok {
			return false
		}
	}
	if j, ok := expect(data, i, `,"tags":`); ok {
		if e.Tags, i, ok = stringArray(data, j); !ok {
			return false
		}
	}
	if j, ok := expect(data, i, `,"seq":`); ok {
		var v int64
		if j < len(data) && data[j] == '-' {
			return false
		}
		if v, i, ok = intField(data, j); !ok {
			return false
		}
		e.Seq = uint64(v)
	}
	if j, ok := expect(data, i, `,"deleted":true`); ok {
		e.Deleted, i = true, j
	}
	if live {
		i, ok = expect(data, i, "}}")
		return ok && i == len(data)
	}
	if i, ok = expect(data, i, `},"ctx":{"attempt":`); !ok {
		return false
	}
	if c == nil {
		c = new(EventContext)
	} else {
		*c = EventContext{}
	}
	f.Ctx = c
	var at int64
	if at, i, ok = intField(data, i); !ok {
		return false
	}
	f.Ctx.Attempt = int(at)
	if i, ok = expect(data, i, `,"ack_deadline_ms":`); !ok {
		return false
	}
	if f.Ctx.AckDeadlineMs, i, ok = intField(data, i); !ok {
		return false
	}
	if j, ok := expect(data, i, `,"trace":{"traceparent":`); ok {
		tc := new(facade.TraceContext)
		if tc.Traceparent, i, ok = stringField(data, j); !ok {
			return false
		}
		if j, ok := expect(data, i, `,"tracestate":`); ok {
			if tc.Tracestate, i, ok = stringField(data, j); !ok {
				return false
			}
		}
		if i, ok = expect(data, i, "}"); !ok {
			return false
		}
		f.Ctx.Trace = tc
	}
	i, ok = expect(data, i, "}}")
	return ok && i == len(data)
}

func stringArray(data []byte, i int) ([]string, int, bool) {
	i, ok := expect(data, i, "[")
	if !ok {
		return nil, 0, false
	}
	var out []string
	if j, ok := expect(data, i, "]"); ok {
		return []string{}, j, true
	}
	for {
		var s string
		if s, i, ok = stringField(data, i); !ok {
			return nil, 0, false
		}
		out = append(out, s)
		if j, ok := expect(data, i, "]"); ok {
			return out, j, true
		}
		if i, ok = expect(data, i, ","); !ok {
			return nil, 0, false
		}
	}
}

// Encode returns the JSON of f. It is the general (reflective) encoder; the
// hot frames have Append functions that produce the same bytes faster.
func Encode(f *Frame) ([]byte, error) {
	return json.Marshal(f)
}

// AppendEvent appends the EVENT frame of event e, delivered to group on the
// subscription of topic, to dst, with e.Trace (when set) in its ctx;
// attempt and ackDeadlineMs are at least 1. The payload's stored bytes are copied (and
// compacted), never re-marshalled; the output equals json.Marshal of the
// equivalent [Frame] for any valid JSON payload.
func AppendEvent(dst []byte, topic, group string, e *facade.EventRecord, attempt int, ackDeadlineMs int64) []byte {
	dst = append(dst, `{"op":"EVENT","topic":`...)
	dst = eventjson.AppendString(dst, topic)
	dst = append(dst, `,"group":`...)
	dst = eventjson.AppendString(dst, group)
	dst = append(dst, `,"event":`...)
	dst = AppendEventRecord(dst, e)
	dst = append(dst, `,"ctx":{"attempt":`...)
	dst = strconv.AppendInt(dst, int64(attempt), 10)
	dst = append(dst, `,"ack_deadline_ms":`...)
	dst = strconv.AppendInt(dst, ackDeadlineMs, 10)
	if tc := e.Trace; tc != nil {
		dst = AppendTrace(append(dst, ','), tc)
	}
	return append(dst, "}}"...)
}

// AppendTrace appends "trace":{…}, tc as json.Marshal writes a
// [facade.TraceContext] under that name.
func AppendTrace(dst []byte, tc *facade.TraceContext) []byte {
	dst = append(dst, `"trace":{`...)
	if tc.Traceparent != "" {
		dst = append(dst, `"traceparent":`...)
		dst = eventjson.AppendString(dst, tc.Traceparent)
	}
	if tc.Tracestate != "" {
		if tc.Traceparent != "" {
			dst = append(dst, ',')
		}
		dst = append(dst, `"tracestate":`...)
		dst = eventjson.AppendString(dst, tc.Tracestate)
	}
	return append(dst, '}')
}

// AppendLiveEvent appends the EVENT frame of a live subscription:
// {"op":"EVENT","topic":…,"event":{…}}, without group (there is nothing
// to acknowledge), with a ctx only for e.Trace; the event's seq is its
// position.
func AppendLiveEvent(dst []byte, e *facade.EventRecord) []byte {
	dst = append(dst, `{"op":"EVENT","topic":`...)
	dst = eventjson.AppendString(dst, e.Topic)
	dst = append(dst, `,"event":`...)
	dst = AppendEventRecord(dst, e)
	if tc := e.Trace; tc != nil {
		dst = AppendTrace(append(dst, `,"ctx":{`...), tc)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// AppendEventRecord appends the JSON of e (as json.Marshal would write it)
// to dst, copying the payload bytes.
func AppendEventRecord(dst []byte, e *facade.EventRecord) []byte { return eventjson.Append(dst, e) }

// AppendOK appends {"op":"OK","corr":corr} (corr omitted when empty).
func AppendOK(dst []byte, corr string) []byte {
	dst = append(dst, `{"op":"OK"`...)
	dst = appendCorr(dst, corr)
	return append(dst, '}')
}

// AppendPublishOK appends the OK of a PUBLISH: the event's id, and as
// extensions its seq and ts.
func AppendPublishOK(dst []byte, corr, id string, seq uint64, ts int64) []byte {
	dst = append(dst, `{"op":"OK"`...)
	dst = appendCorr(dst, corr)
	if id != "" {
		dst = append(dst, `,"id":`...)
		dst = eventjson.AppendString(dst, id)
	}
	if seq != 0 {
		dst = append(dst, `,"seq":`...)
		dst = strconv.AppendUint(dst, seq, 10)
	}
	if ts != 0 {
		dst = append(dst, `,"ts":`...)
		dst = strconv.AppendInt(dst, ts, 10)
	}
	return append(dst, '}')
}

// AppendErr appends {"op":"ERR","corr":corr,"code":code,"msg":msg}.
func AppendErr(dst []byte, corr, code, msg string) []byte {
	return AppendErrRetry(dst, corr, code, msg, 0)
}

// AppendErrRetry appends an ERR frame with retry_after_ms (omitted when 0).
func AppendErrRetry(dst []byte, corr, code, msg string, retryAfterMs int64) []byte {
	dst = append(dst, `{"op":"ERR"`...)
	dst = appendCorr(dst, corr)
	if code != "" {
		dst = append(dst, `,"code":`...)
		dst = eventjson.AppendString(dst, code)
	}
	if msg != "" {
		dst = append(dst, `,"msg":`...)
		dst = eventjson.AppendString(dst, msg)
	}
	if retryAfterMs > 0 {
		dst = append(dst, `,"retry_after_ms":`...)
		dst = strconv.AppendInt(dst, retryAfterMs, 10)
	}
	return append(dst, '}')
}

// AppendAck appends an ACK, NACK or MODACK frame (op), as a client sends
// it. Empty / zero fields are omitted as json.Marshal of [Frame] would.
func AppendAck(dst []byte, op, corr, topic, group, id string, attempt int, reason string, extendMs int64) []byte {
	dst = append(dst, `{"op":`...)
	dst = eventjson.AppendString(dst, op)
	dst = appendCorr(dst, corr)
	if topic != "" {
		dst = append(dst, `,"topic":`...)
		dst = eventjson.AppendString(dst, topic)
	}
	if group != "" {
		dst = append(dst, `,"group":`...)
		dst = eventjson.AppendString(dst, group)
	}
	if id != "" {
		dst = append(dst, `,"id":`...)
		dst = eventjson.AppendString(dst, id)
	}
	if attempt != 0 {
		dst = append(dst, `,"attempt":`...)
		dst = strconv.AppendInt(dst, int64(attempt), 10)
	}
	if reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = eventjson.AppendString(dst, reason)
	}
	if extendMs != 0 {
		dst = append(dst, `,"extend_ms":`...)
		dst = strconv.AppendInt(dst, extendMs, 10)
	}
	return append(dst, '}')
}

func appendCorr(dst []byte, corr string) []byte {
	if corr == "" {
		return dst
	}
	dst = append(dst, `,"corr":`...)
	return eventjson.AppendString(dst, corr)
}

func truncateString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
