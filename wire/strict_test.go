package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/eventhub/eventhub/facade"
)

func TestDecodeIsExact(t *testing.T) {
	for _, tc := range []struct{ name, frame string }{
		{"case variant overrides", `{"op":"PUBLISH","topic":"a.b","Topic":"c.d","payload":1}`},
		{"upper-case op", `{"OP":"AUTH","token":"x"}`},
		{"duplicate op", `{"op":"AUTH","op":"PUBLISH","topic":"a","payload":1}`},
		{"duplicate topic, fast-path shape", `{"op":"ACK","topic":"a","group":"g","id":"x","topic":"b"}`},
		{"duplicate through an escape", `{"op":"ACK","topic":"a","group":"g","id":"x","to\u0070ic":"b"}`},
		{"kelvin sign folds to k", `{"op":"PUBLISH","topic":"a","payload":1,"opts":{"\u212aey":"x"}}`},
		{"nested cursor case", `{"op":"SEEK","topic":"a","group":"g","cursor":{"LastSeq":3}}`},
		{"delete key case", `{"op":"DELETE","topic":"a","key":"k","Key":"j"}`},
		{"trace case", `{"op":"PUBLISH","topic":"a","payload":1,"trace":{"traceparent":"x","Traceparent":"y"}}`},
		{"event ctx trace duplicate", `{"op":"EVENT","topic":"a","group":"g","event":{"id":"i","ts":1,"topic":"a","payload":1},"ctx":{"attempt":1,"ack_deadline_ms":5,"trace":{"tracestate":"a","tracestate":"b"}}}`},
	} {
		var f Frame
		err := Decode([]byte(tc.frame), &f)
		if err == nil && strings.Contains(tc.frame, `"opts"`) {
			var o facade.PublishOptions
			err = DecodeOpts(f.Opts, &o)
		}
		if !errors.Is(err, &facade.Error{Code: CodeBadFrame}) {
			t.Errorf("%s: %s decoded (%v), want bad_frame", tc.name, tc.frame, err)
		}
	}
	// Unknown keys are still ignored, as before.
	var f Frame
	if err := Decode([]byte(`{"op":"AUTH","token":"x","client":"v2"}`), &f); err != nil {
		t.Fatalf("unknown key: %v", err)
	}
}

func TestDecodeRefusesInvalidUTF8(t *testing.T) {
	for _, tc := range []struct{ name, frame, code string }{
		{"payload", "{\"op\":\"PUBLISH\",\"topic\":\"a\",\"payload\":\"\xff\"}", CodeBadPayload},
		{"key", "{\"op\":\"PUBLISH\",\"topic\":\"a\",\"payload\":1,\"opts\":{\"key\":\"k\xfe\"}}", CodeBadKey},
		{"group", "{\"op\":\"SUBSCRIBE\",\"topic\":\"a\",\"group\":\"g\xc3\"}", CodeBadRequest},
		{"corr", "{\"op\":\"AUTH\",\"token\":\"t\",\"corr\":\"\xff\"}", CodeBadRequest},
	} {
		var f Frame
		err := Decode([]byte(tc.frame), &f)
		if !errors.Is(err, &facade.Error{Code: tc.code}) {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
}

// FuzzDecodeExact: whenever Decode accepts a frame, what it decoded is what
// a reader that looks only at the exact, single key sees: no duplicate or
// case-variant key can make the hub read another frame than a proxy. The
// same holds for the objects inside a frame (cursor, event, ctx) and for
// opts, as a PUBLISH or a SUBSCRIBE decodes them.
func FuzzDecodeExact(f *testing.F) {
	for _, s := range []string{
		`{"op":"PUBLISH","topic":"a","Topic":"b","payload":1}`,
		`{"op":"ACK","topic":"a","group":"g","id":"x","topic":"b"}`,
		`{"OP":"AUTH"}`,
		`{"op":"AUTH","token":"t","corr":"1"}`,
		`{"op":"SUBSCRIBE","topic":"a","group":"g","grOUP":"h"}`,
		`{"op":"ACK","topic":"a","group":"g","id":"x","to\u0070ic":"b"}`,
		"{\"op\":\"AUTH\",\"corr\":\"\xff\"}",
		`{"op":"PUBLISH","topic":"a","payload":1,"opts":{"key":"k","Key":"j"}}`,
		`{"op":"SUBSCRIBE","topic":"a","group":"g","opts":{"from":"earliest","from":"latest"}}`,
		`{"op":"SEEK","topic":"a","group":"g","cursor":{"topic":"a","lastSeq":1,"lastSeq":2}}`,
	} {
		f.Add([]byte(s))
	}
	frameNames := jsonNames(reflect.TypeFor[Frame]())
	nested := map[string][]string{
		"cursor": jsonNames(reflect.TypeFor[facade.CursorPosition]()),
		"event":  jsonNames(reflect.TypeFor[facade.EventRecord]()),
		"ctx":    jsonNames(reflect.TypeFor[EventContext]()),
	}
	publishNames := jsonNames(reflect.TypeFor[facade.PublishOptions]())
	subscribeNames := jsonNames(reflect.TypeFor[facade.SubscribeOptions]())
	f.Fuzz(func(t *testing.T, data []byte) {
		var fr Frame
		if Decode(data, &fr) != nil {
			return
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(data, &fields); err != nil {
			t.Fatalf("accepted %q, which is not an object: %v", data, err)
		}
		if why := inexactKeys(data, frameNames); why != "" {
			t.Fatalf("accepted %q, which has %s", data, why)
		}
		for name, names := range nested {
			if why := inexactKeys(fields[name], names); why != "" {
				t.Fatalf("accepted %q, whose %s has %s", data, name, why)
			}
		}
		for name, got := range map[string]string{"op": fr.Op, "topic": fr.Topic, "group": fr.Group, "id": fr.ID, "token": fr.Token, "corr": fr.Corr} {
			var want string
			if raw, ok := fields[name]; ok {
				if err := json.Unmarshal(raw, &want); err != nil {
					continue
				}
			}
			if got != want {
				t.Fatalf("%q: the hub read %s=%q, the exact key says %q", data, name, got, want)
			}
		}
		if len(fr.Opts) == 0 {
			return
		}
		var po facade.PublishOptions
		if DecodeOpts(fr.Opts, &po) == nil {
			if why := inexactKeys(fr.Opts, publishNames); why != "" {
				t.Fatalf("accepted publish opts %q, which have %s", fr.Opts, why)
			}
		}
		var so facade.SubscribeOptions
		if DecodeOpts(fr.Opts, &so) == nil {
			if why := inexactKeys(fr.Opts, subscribeNames); why != "" {
				t.Fatalf("accepted subscribe opts %q, which have %s", fr.Opts, why)
			}
		}
	})
}

// jsonNames lists the JSON field names of a struct type.
func jsonNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// inexactKeys says what makes the JSON object data ambiguous to a reader
// that matches names exactly: a duplicate key, or a key equal to one of
// names but for case (Unicode simple folding, as encoding/json matches).
// It returns "" for an exact object and for data that is no object.
func inexactKeys(data []byte, names []string) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		k, _ := tok.(string)
		if seen[k] {
			return fmt.Sprintf("the key %q twice", k)
		}
		seen[k] = true
		for _, n := range names {
			if k != n && strings.EqualFold(k, n) {
				return fmt.Sprintf("the key %q for %q", k, n)
			}
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return ""
		}
	}
	return ""
}

// TestDecodeDeleteOpts: the opts of DELETE decode exactly into
// facade.DeleteOptions: a field of the wrong type or an inexact name is
// bad_frame.
func TestDecodeDeleteOpts(t *testing.T) {
	var o facade.DeleteOptions
	if err := DecodeOpts([]byte(`{"purge":true,"expected_last_seq":0}`), &o); err != nil || !o.Purge || o.ExpectedLastSeq == nil || *o.ExpectedLastSeq != 0 {
		t.Fatalf("decoded %+v, %v", o, err)
	}
	for _, bad := range []string{`{"purge":"yes"}`, `{"Purge":true}`, `{"expected_last_seq":-1}`, `{"purge":true,"purge":false}`} {
		var o facade.DeleteOptions
		if err := DecodeOpts([]byte(bad), &o); !errors.Is(err, &facade.Error{Code: CodeBadFrame}) {
			t.Errorf("%s: %v, want bad_frame", bad, err)
		}
	}
}
