package eventjson

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/eventhub/eventhub/facade"
)

func TestAppendEvent(t *testing.T) {
	part := 3
	tests := []facade.EventRecord{
		{ID: "x", TS: 1, Topic: "a", Payload: json.RawMessage(`null`)},
		{ID: "0190a5b6-7c3d-7e4f-8a9b-0c1d2e3f4a5b", SID: "s", TS: 1700000000000, Topic: "a.b", Key: "host:name:1",
			Partition: &part, Headers: map[string]string{"z": "1", "a": "<&>", "m": "é\u2028"},
			Payload: json.RawMessage(`{"a":[1,2,{"b":"c"}]}`), CausedBy: []string{"p", "q"}, Tags: []string{"#t"}, Seq: 42},
		{ID: "q\"uote\\", TS: -5, Topic: "t", Key: "bad\xffutf8\x01\n", Payload: json.RawMessage(`"s"`), Tags: []string{}},
		{ID: "e", TS: 0, Topic: "t", Headers: map[string]string{}, Payload: nil, CausedBy: nil},
		{ID: "d", TS: 2, Topic: "t", Key: "k", Payload: json.RawMessage(`null`), Seq: 7, Deleted: true},
	}
	for _, e := range tests {
		want, err := json.Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		if got := Append(nil, &e); !bytes.Equal(got, want) {
			t.Errorf("Append:\n got %s\nwant %s", got, want)
		}
	}
}

// TestAppendEventPayloadCompacted: payload bytes are not re-encoded but
// compacted and HTML-escaped in one pass, as json.Marshal writes a
// json.RawMessage, so one event is always one line.
func TestAppendEventPayloadCompacted(t *testing.T) {
	e := facade.EventRecord{ID: "i", TS: 1, Topic: "t", Payload: json.RawMessage("{\n  \"a\": \"<b> x\",\r\n  \"c\" : [1,\n 2]\n}")}
	got := Append([]byte("prefix"), &e)
	if want := `prefix{"id":"i","ts":1,"topic":"t","payload":{"a":"\u003cb\u003e x","c":[1,2]}}`; string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// FuzzAppendEvent checks Append against json.Marshal for arbitrary
// strings and compact payloads, and that the line never holds a newline.
func FuzzAppendEvent(f *testing.F) {
	f.Add("id", "topic.a", "key", "hv", "tag", `{"a":1}`, int64(5), uint64(7))
	f.Add("\xff", "<>&", "\u2028", "\n", "\"", "[1,\n2]", int64(-1), uint64(0))
	f.Fuzz(func(t *testing.T, id, topic, key, hv, tag, payload string, ts int64, seq uint64) {
		e := facade.EventRecord{ID: id, TS: ts, Topic: topic, Key: key, Seq: seq,
			Headers: map[string]string{hv: tag, "k": hv}, Tags: []string{tag, hv}, CausedBy: []string{key}}
		if json.Valid([]byte(payload)) {
			e.Payload = json.RawMessage(payload)
		} else {
			e.Payload = json.RawMessage(`null`)
		}
		got := Append(nil, &e)
		if bytes.ContainsAny(got, "\r\n") {
			t.Fatalf("line break in %q", got)
		}
		var back facade.EventRecord
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("invalid JSON %q: %v", got, err)
		}
		// Equal to json.Marshal once the payload is in Marshal's form.
		var compact bytes.Buffer
		if err := json.Compact(&compact, e.Payload); err != nil {
			t.Fatal(err)
		}
		e.Payload = compact.Bytes()
		want, err := json.Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		var wantBack facade.EventRecord
		if err := json.Unmarshal(want, &wantBack); err != nil {
			t.Fatal(err)
		}
		var gotV, wantV any
		if err := json.Unmarshal(back.Payload, &gotV); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(wantBack.Payload, &wantV); err != nil {
			t.Fatal(err)
		}
		back.Payload, wantBack.Payload = nil, nil
		if !reflect.DeepEqual(back, wantBack) || !reflect.DeepEqual(gotV, wantV) {
			t.Fatalf("Append %q decodes to a different record than json.Marshal %q", got, want)
		}
		if !bytes.ContainsAny(compact.Bytes(), "<>&") {
			if !bytes.Equal(Append(nil, &e), want) {
				t.Fatalf("appendEvent differs from json.Marshal:\n got %q\nwant %q", Append(nil, &e), want)
			}
		}
	})
}
