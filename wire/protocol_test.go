package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/eventjson"
)

// refEvent is the EVENT frame as a plain struct: what AppendEvent must
// equal under json.Marshal.
type refEvent struct {
	Op    string              `json:"op"`
	Topic string              `json:"topic"`
	Group string              `json:"group"`
	Event *facade.EventRecord `json:"event"`
	Ctx   EventContext        `json:"ctx"`
}

func marshalRef(t testing.TB, topic, group string, e *facade.EventRecord, attempt int, ms int64) []byte {
	t.Helper()
	b, err := json.Marshal(refEvent{OpEvent, topic, group, e, EventContext{Attempt: attempt, AckDeadlineMs: ms, Trace: e.Trace}})
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	return b
}

func TestAppendEventMatchesJSON(t *testing.T) {
	part := 3
	cases := []struct {
		name string
		e    *facade.EventRecord
	}{
		{"minimal", &facade.EventRecord{ID: "0190f0e0-0000-7000-8000-000000000001", TS: 1, Topic: "a.b", Payload: json.RawMessage(`{"x":1}`)}},
		{"all fields", &facade.EventRecord{
			ID: "id", SID: "sid", TS: 1_700_000_000_000, Topic: "a.b", Key: "host:name:1234", Partition: &part,
			Headers:  map[string]string{"z": "last", "a": "first", "m": "<mid>", "": "empty"},
			Payload:  json.RawMessage(`[1,"two",{"three":3.0e1},null,true]`),
			CausedBy: []string{"c1", "c2"}, Tags: []string{"t"}, Seq: 42,
		}},
		{"whitespace payload", &facade.EventRecord{ID: "i", Topic: "t", Payload: json.RawMessage(" {\n\t\"a b\" : [ 1 , 2 ] ,\r\n \"c\":\"x y\" } ")}},
		{"html and separators", &facade.EventRecord{ID: "<&>", Topic: "t", Key: "a\u2028b\u2029c", Payload: json.RawMessage(`{"h":"<script>&amp;</script>","s":"\u2028 ` + "\u2028\u2029" + `"}`)}},
		{"escapes", &facade.EventRecord{ID: "q\"b\\s/\b\f\n\r\t\x00\x1f\x7f", Topic: "t", Payload: json.RawMessage(`"\"\\\/\b\f\n\r\t\u0000"`)}},
		{"invalid utf8 in strings", &facade.EventRecord{ID: "a\xffb\xc0", Topic: "t", Tags: []string{"\xe2\x80"}, Payload: json.RawMessage(`"ok"`)}},
		{"unicode", &facade.EventRecord{ID: "日本", Topic: "t", Payload: json.RawMessage(`"日本 ü 🎉"`)}},
		{"nil payload", &facade.EventRecord{ID: "i", Topic: "t"}},
		{"tombstone", &facade.EventRecord{ID: "i", Topic: "t", Key: "k", Payload: json.RawMessage(`null`), Seq: 9, Deleted: true}},
		{"traced", &facade.EventRecord{ID: "i", Topic: "t", Payload: json.RawMessage(`1`), Trace: &facade.TraceContext{
			Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Tracestate: "congo=t61rcWkgMzE"}}},
		{"traceparent only", &facade.EventRecord{ID: "i", Topic: "t", Payload: json.RawMessage(`1`), Trace: &facade.TraceContext{
			Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}}},
		{"empty collections", &facade.EventRecord{ID: "i", Topic: "t", Headers: map[string]string{}, Tags: []string{}, Payload: json.RawMessage(`0`)}},
		{"many headers", &facade.EventRecord{ID: "i", Topic: "t", Payload: json.RawMessage(`0`), Headers: map[string]string{
			"k9": "9", "k1": "1", "k8": "8", "k2": "2", "k7": "7", "k3": "3", "k6": "6", "k4": "4", "k5": "5", "k10": "10",
		}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := AppendEvent(nil, "sub.topic", "grp<1>", tc.e, 2, 29_999)
			want := marshalRef(t, "sub.topic", "grp<1>", tc.e, 2, 29_999)
			if !bytes.Equal(got, want) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
			// And the union Frame decodes it back.
			var f Frame
			if err := Decode(got, &f); err != nil {
				t.Fatal(err)
			}
			if f.Op != OpEvent || f.Event.ID != strings.ToValidUTF8(tc.e.ID, "\ufffd") || f.Ctx.Attempt != 2 {
				t.Fatalf("decoded %+v", f)
			}
		})
	}
}

func TestAppendFramesMatchEncode(t *testing.T) {
	cases := []struct {
		got  []byte
		want Frame
	}{
		{AppendOK(nil, ""), Frame{Op: OpOK}},
		{AppendOK(nil, "c<1>"), Frame{Op: OpOK, Corr: "c<1>"}},
		{AppendPublishOK(nil, "c", "id", 7, 1700), Frame{Op: OpOK, Corr: "c", ID: "id", Seq: 7, TS: 1700}},
		{AppendPublishOK(nil, "", "id", 0, 0), Frame{Op: OpOK, ID: "id"}},
		{AppendErr(nil, "c", CodeBadJSON, "bad \"json\"\n"), Frame{Op: OpErr, Corr: "c", Code: CodeBadJSON, Msg: "bad \"json\"\n"}},
		{AppendErr(nil, "", CodeInternal, ""), Frame{Op: OpErr, Code: CodeInternal}},
		{AppendAck(nil, OpAck, "", "a.b", "g", "id", 0, "", 0), Frame{Op: OpAck, Topic: "a.b", Group: "g", ID: "id"}},
		{AppendAck(nil, OpNack, "c", "a.b", "g", "id", 3, "why & how", 0), Frame{Op: OpNack, Corr: "c", Topic: "a.b", Group: "g", ID: "id", Attempt: 3, Reason: "why & how"}},
		{AppendAck(nil, OpModAck, "c", "a.b", "g", "id", 1, "", 5000), Frame{Op: OpModAck, Corr: "c", Topic: "a.b", Group: "g", ID: "id", Attempt: 1, ExtendMs: 5000}},
	}
	for _, tc := range cases {
		want, err := Encode(&tc.want)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tc.got, want) {
			t.Errorf("got  %s\nwant %s", tc.got, want)
		}
	}
}

func TestDecode(t *testing.T) {
	cases := []struct {
		in       string
		wantErr  error
		wantCorr string
		want     Frame
	}{
		{in: `{"op":"AUTH","token":"t","corr":"1"}`, want: Frame{Op: OpAuth, Token: "t", Corr: "1"}},
		{in: `{"op":"PUBLISH","topic":"a.b","payload":{"x":[1]},"opts":{"key":"k"}}`, want: Frame{Op: OpPublish, Topic: "a.b", Payload: json.RawMessage(`{"x":[1]}`), Opts: json.RawMessage(`{"key":"k"}`)}},
		{in: `{"op":"PUBLISH","topic":"a.b","payload":null}`, want: Frame{Op: OpPublish, Topic: "a.b", Payload: json.RawMessage(`null`)}},
		{in: `{"op":"ACK","topic":"a","group":"g","id":"x","unknown":{"ignored":true}}`, want: Frame{Op: OpAck, Topic: "a", Group: "g", ID: "x"}},
		{in: ``, wantErr: ErrBadJSON},
		{in: `{"op":"AUTH"`, wantErr: ErrBadJSON},
		{in: `{"op":"AUTH"}x`, wantErr: ErrBadJSON},
		{in: `{"op":"AUTH","token":"\ud800"}`, want: Frame{Op: OpAuth, Token: "\ufffd"}},
		{in: `null`, wantErr: ErrBadFrame},
		{in: `"AUTH"`, wantErr: ErrBadFrame},
		{in: `[{"op":"AUTH"}]`, wantErr: ErrBadFrame},
		{in: `{"op":1}`, wantErr: ErrBadFrame},
		{in: `{"op":"ACK","corr":"c","id":7}`, wantErr: ErrBadFrame, wantCorr: "c"},
		{in: `{"op":"MODACK","corr":"c","extend_ms":"soon"}`, wantErr: ErrBadFrame, wantCorr: "c"},
		{in: `{"op":"NOPE","corr":"c"}`, wantErr: ErrUnknownOp, wantCorr: "c"},
		{in: `{"op":""}`, wantErr: ErrBadFrame},
	}
	for _, tc := range cases {
		var f Frame
		err := Decode([]byte(tc.in), &f)
		if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
			t.Errorf("%s: err %v, want %v", tc.in, err, tc.wantErr)
			continue
		}
		if err != nil {
			if f.Corr != tc.wantCorr {
				t.Errorf("%s: corr %q, want %q", tc.in, f.Corr, tc.wantCorr)
			}
			continue
		}
		if !reflect.DeepEqual(f, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.in, f, tc.want)
		}
	}
}

// The hot frames take the fast decoders.
func TestFastPathsTaken(t *testing.T) {
	var f Frame
	for _, b := range [][]byte{
		AppendAck(nil, OpAck, "", "a.b", "g", "0190f0e0-0000-7000-8000-000000000001", 2, "", 0),
		AppendAck(nil, OpModAck, "c1", "a.b", "g", "x", 0, "", 5000),
		AppendOK(nil, "c"), AppendErr(nil, "c", CodeUnknownID, "not in flight"),
		AppendPublishOK(nil, "c", "id", 3, 4),
	} {
		if !decodeFlat(b, &f, nil) {
			t.Errorf("flat fast path refused %s", b)
		}
		f = Frame{}
	}
	part := 1
	e := &facade.EventRecord{ID: "i", SID: "s", TS: 5, Topic: "a.b", Key: "k", Partition: &part,
		Headers: map[string]string{"a": "1", "b": "2"}, Payload: json.RawMessage(`{"x":[1,"]",{"y":"}"}]}`),
		CausedBy: []string{"c"}, Tags: []string{}, Seq: 9}
	b := AppendEvent(nil, "a.b", "g", e, 1, 100)
	if !decodeEvent(b, &f, nil, nil, nil) {
		t.Fatalf("EVENT fast path refused %s", b)
	}
	var slow Frame
	if err := decodeJSON(b, &slow); err != nil {
		t.Fatal(err)
	}
	f.Event.Tags, slow.Event.Tags = nil, nil // [] is omitted by the encoder
	if !reflect.DeepEqual(f, slow) {
		t.Fatalf("fast %+v\nslow %+v", f, slow)
	}
}

// Live EVENT frames (no group, no ctx) take the EVENT fast path too, and
// it refuses payloads the general decoder refuses.
func TestFastPathLiveEvent(t *testing.T) {
	e := &facade.EventRecord{ID: "i", TS: 5, Topic: "a.b", Key: "k", Headers: map[string]string{"h": "v"},
		Payload: json.RawMessage(`{"x":[1,-2.5e3,true,false,null,"\u00e9é\"",{}],"y":[]}`), Seq: 9}
	b := AppendLiveEvent(nil, e)
	var fast, slow Frame
	if !decodeEvent(b, &fast, nil, nil, nil) {
		t.Fatalf("EVENT fast path refused %s", b)
	}
	if err := decodeSlow(b, &slow); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("fast %+v\nslow %+v", fast, slow)
	}
	if fast.Group != "" || fast.Ctx != nil || fast.Event.Seq != 9 {
		t.Fatalf("live frame decoded as %+v", fast)
	}
	for _, p := range []string{`{"a":1,}`, `[1 2]`, `"\x"`, "\"\xff\"", `01`, `1.`, `-`, `{"a"}`, `tru`, `[`, `"\u12"`, "\"\x01\""} {
		bad := []byte(`{"op":"EVENT","topic":"a","event":{"id":"i","ts":1,"topic":"a","payload":` + p + `}}`)
		var f Frame
		if decodeEvent(bad, &f, nil, nil, nil) {
			t.Errorf("fast path accepted payload %q", p)
		}
		if err := Decode(bad, &f); err == nil {
			t.Errorf("Decode accepted payload %q", p)
		}
	}
}

// FuzzScanValue: scanValue accepts exactly the values encoding/json
// accepts, in valid UTF-8 (nested at most 64 deep, with no whitespace
// around them).
func FuzzScanValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e-3,"x\u00e9",true,false,null,{}]}`, `[]`, ` [ 1 , {"a" : "b"} ] `, `-0`, `01`, `"\ud800"`, "\"\xff\"", `{"a":1,}`, `[1]x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		end, ok := scanValue(data, 0)
		if ok && (!json.Valid(data[:end]) || !utf8.Valid(data[:end])) {
			t.Fatalf("scanValue accepted %q", data[:end])
		}
		trimmed := len(data) > 0 && len(bytes.TrimSpace(data)) == len(data)
		if trimmed && json.Valid(data) && utf8.Valid(data) && (!ok || end != len(data)) {
			if depth := bytes.Count(data, []byte("[")) + bytes.Count(data, []byte("{")); depth <= 64 {
				t.Fatalf("scanValue refused %q (end %d, ok %v)", data, end, ok)
			}
		}
	})
}

func TestAppendCompact(t *testing.T) {
	for _, in := range []string{`{}`, ` [ ] `, `{"a" : "b c" , "d":[1, 2,3 ]}`, `"\" <"`, `"\\" `, "\"\u2028\"", `"\u2028"`, `{"a":"\\\"&"}`} {
		got := eventjson.AppendCompact(nil, []byte(in))
		want, err := json.Marshal(json.RawMessage(in))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%q: got %s want %s", in, got, want)
		}
	}
}

// FuzzDecode: Decode never panics; every error carries a code of the table;
// a decoded frame re-encodes and decodes to the same frame.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"op":"AUTH","token":"t","corr":"1"}`,
		`{"op":"SUBSCRIBE","topic":"a.b","group":"g","opts":{"from":"earliest","ackTimeoutMs":1000}}`,
		`{"op":"PUBLISH","topic":"a.b","payload":{"x":[1, 2]},"opts":{"key":"k","tags":["a"]}}`,
		`{"op":"ACK","topic":"a","group":"g","id":"x","attempt":2}`,
		`{"op":"MODACK","topic":"a","group":"g","id":"x","extend_ms":3000}`,
		`{"op":"SEEK","topic":"a","group":"g","cursor":{"lastSeq":3}}`,
		`{"op":"DELETE","topic":"a","key":"k","opts":{"purge":true,"expected_last_seq":3}}`,
		`{"op":"EVENT","topic":"a","group":"g","event":{"id":"i","ts":1,"topic":"a","payload":null},"ctx":{"attempt":1,"ack_deadline_ms":5}}`,
		`{"op":"EVENT","topic":"a","group":"g","event":{"id":"i","ts":1,"topic":"a","key":"k","payload":null,"seq":2,"deleted":true},"ctx":{"attempt":1,"ack_deadline_ms":5}}`,
		`{"op":"EVENT","topic":"a","event":{"id":"i","ts":1,"topic":"a","payload":{"s":"\u00e9Ã©"},"seq":3}}`,
		`{"op":"EVENT","topic":"a","group":"g","event":{"id":"i","ts":1,"topic":"a","payload":1},"ctx":{"attempt":1,"ack_deadline_ms":5,"trace":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"a=b"}}}`,
		`{"op":"PUBLISH","topic":"a","payload":1,"trace":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`,
		`{"op":"PUBLISH","topic":"a","payload":1,"trace":{"traceparent":"x","Traceparent":"y"}}`,
		`{"op":"ERR","code":"bad_json","msg":"x"}`,
		`{"op":"AUTH"`, `[]`, `null`, `{"op":7}`, `{"OP":"AUTH","Token":"x"}`, `{"op":"AUTH","token":"\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The fast decoders agree with encoding/json whenever they accept.
		var fast, slow Frame
		accepted := decodeEvent(data, &fast, nil, nil, nil)
		if !accepted {
			fast = Frame{}
			accepted = decodeFlat(data, &fast, nil)
		}
		if accepted {
			if err := decodeSlow(data, &slow); err != nil {
				t.Fatalf("fast path accepted what the general decoder refuses (%v): %q", err, data)
			}
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("fast and slow decoding differ for %q:\n%+v\n%+v", data, fast, slow)
			}
		}
		var fr Frame
		err := Decode(data, &fr)
		// A Decoder, warmed up with names, and decoding into the event
		// and ctx it is given, decodes the same frame with the same error.
		var dec Decoder
		var warm Frame
		_ = dec.Decode([]byte(`{"op":"ACK","topic":"a","group":"g","id":"x"}`), &warm)
		var fd Frame
		e, c := &facade.EventRecord{ID: "stale"}, &EventContext{Attempt: 9}
		derr := dec.DecodeEvent(data, &fd, e, c)
		if (err == nil) != (derr == nil) || (err != nil && err.Error() != derr.Error()) {
			t.Fatalf("Decoder: %v, Decode: %v for %q", derr, err, data)
		}
		if err == nil {
			if fd.Event != nil && fd.Event != e || fd.Ctx != nil && fd.Ctx != c {
				t.Fatalf("Decoder did not decode into the event and ctx given for %q", data)
			}
			if !reflect.DeepEqual(fd, fr) {
				t.Fatalf("Decoder and Decode differ for %q:\n%+v\n%+v", data, fd, fr)
			}
		}
		if err != nil {
			var fe *facade.Error
			if !errors.As(err, &fe) {
				t.Fatalf("error without code: %v", err)
			}
			if _, ok := LookupCode(fe.Code); !ok {
				t.Fatalf("code %q not in the table", fe.Code)
			}
			return
		}
		enc, err := Encode(&fr)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", fr, err)
		}
		var again Frame
		if err := Decode(enc, &again); err != nil {
			t.Fatalf("re-decode %s: %v", enc, err)
		}
		normalize(&fr)
		normalize(&again)
		if !reflect.DeepEqual(fr, again) {
			t.Fatalf("round trip changed the frame:\n%+v\n%+v", fr, again)
		}
		// The encoding is canonical: encoding again changes nothing.
		if enc2, err := Encode(&again); err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable:\n%s\n%s (%v)", enc, enc2, err)
		}
	})
}

// decodeSlow is Decode without the fast paths: encoding/json and the
// strictness and UTF-8 checks around it.
func decodeSlow(data []byte, f *Frame) error {
	if err := decodeJSON(data, f); err != nil {
		return err
	}
	if err := strictKeys(data, frameSchema, ""); err != nil {
		return err
	}
	return checkUTF8(data, f)
}

// normalize compacts the raw JSON fields and escapes <, > and & in them
// (encoding does both).
func normalize(f *Frame) {
	c := func(r json.RawMessage) json.RawMessage {
		if r == nil {
			return nil
		}
		var b, h bytes.Buffer
		if err := json.Compact(&b, r); err != nil {
			return r
		}
		json.HTMLEscape(&h, b.Bytes())
		return h.Bytes()
	}
	f.Payload, f.Opts = c(f.Payload), c(f.Opts)
	if e := f.Event; e != nil {
		// Absent, empty and null encode alike.
		e.Payload = c(e.Payload)
		if e.Payload == nil {
			e.Payload = json.RawMessage("null")
		}
		if len(e.Headers) == 0 {
			e.Headers = nil
		}
		if len(e.Tags) == 0 {
			e.Tags = nil
		}
		if len(e.CausedBy) == 0 {
			e.CausedBy = nil
		}
	}
}

// FuzzEncodeEvent: for any strings and any valid JSON payload, AppendEvent
// is valid JSON and equals json.Marshal of the same frame.
func FuzzEncodeEvent(f *testing.F) {
	f.Add("0190f0e0-0000-7000-8000-000000000001", "a.b", "", "", "", "", []byte(`{"x":1}`), 1, int64(30000))
	f.Add("<id>", "t", "host:a b", "h<", "v&", "tag\u2028", []byte(" [ 1 , \"a b\" ] "), 3, int64(0))
	f.Add("\xff", "\x00", "\u2029", "\"", "\\", "\n", []byte(`"\u003c<>&"`), -1, int64(-5))
	f.Add("i", "t", "k", "", "v", "", []byte("\"\xe2\x80\xa8\""), 2, int64(7))
	f.Add("i", "t", "", "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "a=b", []byte(`1`), 1, int64(5))
	f.Fuzz(func(t *testing.T, id, topic, key, hk, hv, tag string, payload []byte, attempt int, ms int64) {
		if !json.Valid(payload) {
			return
		}
		e := &facade.EventRecord{ID: id, TS: int64(len(id)), Topic: topic, Key: key, Payload: payload, Seq: uint64(len(key))}
		if hk != "" || hv != "" {
			e.Headers = map[string]string{hk: hv, "x-" + hk: hv}
		}
		if tag != "" {
			e.Tags = []string{tag, tag}
			e.CausedBy = []string{id}
		}
		attempt, ms = max(attempt, 1), max(ms, 1) // their domain
		if hk == "traceparent" || len(hv)%3 == 1 {
			e.Trace = &facade.TraceContext{Traceparent: hv, Tracestate: tag}
		}
		got := AppendEvent(nil, topic, key, e, attempt, ms)
		if !json.Valid(got) {
			t.Fatalf("invalid JSON: %s", got)
		}
		want := marshalRef(t, topic, key, e, attempt, ms)
		if !bytes.Equal(got, want) {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		var fast, slow Frame
		if decodeEvent(got, &fast, nil, nil, nil) {
			if err := decodeJSON(got, &slow); err != nil || !reflect.DeepEqual(fast, slow) {
				t.Fatalf("fast EVENT decoding of %s:\n%+v\n%+v (%v)", got, fast, slow, err)
			}
		}
	})
}

// BenchmarkDecodeEvent: decoding an EVENT frame with a 128-byte payload,
// live and in a group, with the fast path and with encoding/json.
func BenchmarkDecodeEvent(b *testing.B) {
	e := &facade.EventRecord{ID: "0190f0e0-0000-7000-8000-000000000001", TS: 1700000000000, Topic: "metrics.host",
		Payload: json.RawMessage(`{"host":"bench","name":"stt","pid":1234,"cpu_pct":12.5,"mem_mb":210.25,"pad":"` + strings.Repeat("x", 41) + `"}`), Seq: 12345}
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"live", AppendLiveEvent(nil, e)},
		{"group", AppendEvent(nil, e.Topic, "g", e, 1, 30000)},
	} {
		b.Run(tc.name+"/fast", func(b *testing.B) {
			b.ReportAllocs()
			var f Frame
			for b.Loop() {
				if err := Decode(tc.frame, &f); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			var f Frame
			for b.Loop() {
				f = Frame{}
				if err := decodeSlow(tc.frame, &f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestLiveEventTrace: a live EVENT of an event with trace context has a
// ctx holding only it, as json.Marshal of the frame writes it; without,
// no ctx.
func TestLiveEventTrace(t *testing.T) {
	tc := &facade.TraceContext{Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Tracestate: "a=b"}
	e := &facade.EventRecord{ID: "i", TS: 5, Topic: "a.b", Payload: json.RawMessage(`1`), Seq: 9, Trace: tc}
	got := AppendLiveEvent(nil, e)
	want, err := Encode(&Frame{Op: OpEvent, Topic: "a.b", Event: e, Ctx: &EventContext{Trace: tc}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	var f Frame
	if err := Decode(got, &f); err != nil || f.Ctx == nil || *f.Ctx.Trace != *tc || f.Group != "" {
		t.Fatalf("decoded %+v (%v)", f, err)
	}
	e.Trace = nil
	if b := AppendLiveEvent(nil, e); bytes.Contains(b, []byte(`"ctx"`)) {
		t.Fatalf("live EVENT without trace context has a ctx: %s", b)
	}
}
