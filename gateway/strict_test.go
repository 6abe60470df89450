package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

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
	} {
		var f Frame
		err := Decode([]byte(tc.frame), &f)
		if err == nil && strings.Contains(tc.frame, `"opts"`) {
			var o facade.PublishOptions
			err = decodeOpts(f.Opts, &o)
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

// TestInvalidUTF8RefusedOnEveryWayIn: the WebSocket, HTTP and the Go API
// refuse a payload that browsers could never receive.
func TestInvalidUTF8RefusedOnEveryWayIn(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	c := dialAuth(t, g.url, "")
	r := c.request(Frame{Op: OpPublish, Topic: "utf.t", Payload: json.RawMessage("\"\xff\xfe\"")})
	if r.Op != OpErr || r.Code != CodeBadPayload {
		t.Fatalf("WebSocket: %+v, want ERR bad_payload", r)
	}
	resp, err := http.Post(g.http+"/publish/utf.t", "application/json", bytes.NewReader([]byte("{\"a\":\"\xc3\x28\"}")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("HTTP: %s, want 400", resp.Status)
	}
	req, _ := http.NewRequest(http.MethodPost, g.http+"/publish/utf.t", strings.NewReader(`1`))
	req.Header.Set(HeaderKey, "k\xff")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("HTTP key: %s, want 400", resp.Status)
	}
	if _, err := bus.Publish(t.Context(), "utf.t", json.RawMessage("\"\xff\""), facade.PublishOptions{}); !errors.Is(err, facade.ErrBadPayload) {
		t.Fatalf("Go API: %v, want bad_payload", err)
	}
	// The connection is still usable.
	c.ok(Frame{Op: OpPublish, Topic: "utf.t", Payload: json.RawMessage(`"fine"`)})
}

// TestPublishTSValidatedAlike: a negative ts is refused on the WebSocket as
// on HTTP.
func TestPublishTSValidatedAlike(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	c := dialAuth(t, g.url, "")
	c.errCode(Frame{Op: OpPublish, Topic: "ts.t", Payload: json.RawMessage(`1`), Opts: json.RawMessage(`{"ts":-1}`)}, CodeBadRequest)
	req, _ := http.NewRequest(http.MethodPost, g.http+"/publish/ts.t", strings.NewReader(`1`))
	req.Header.Set(HeaderTS, "-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("HTTP ts -1: %s", resp.Status)
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
		if decodeOpts(fr.Opts, &po) == nil {
			if why := inexactKeys(fr.Opts, publishNames); why != "" {
				t.Fatalf("accepted publish opts %q, which have %s", fr.Opts, why)
			}
		}
		var so facade.SubscribeOptions
		if decodeOpts(fr.Opts, &so) == nil {
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

// TestNativeInvalidUTF8DeliveredAsBase64: a native NATS client can store
// bytes the hub's own ways in refuse. Such an event reaches WebSocket
// clients as a base64 string marked by its header, never as a text frame
// that is not UTF-8 (browsers fail the socket on one, 1007).
func TestNativeInvalidUTF8DeliveredAsBase64(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	publish(t, bus, "native.utf", `"first"`) // the hub makes the topic's stream
	bodies := [][]byte{
		[]byte("\"\xff\""),     // JSON in shape, not UTF-8
		[]byte("\xc3\x28 raw"), // neither
		[]byte("plain text é"), // UTF-8, not JSON: a JSON string
	}
	for _, b := range bodies {
		if _, err := bus.JetStream().Publish(t.Context(), "native.utf", b); err != nil {
			t.Fatal(err)
		}
	}
	c := dialAuth(t, g.url, "")
	c.ok(subscribeFrame("native.utf", "g", `{"from":"earliest"}`))
	c.mustEvent()
	for i, b := range bodies {
		ev := c.mustEvent()
		c.send(ackFrame(ev))
		var want json.RawMessage
		if utf8.Valid(b) {
			want, _ = json.Marshal(string(b))
			if ev.Event.Headers["content-transfer-encoding"] != "" {
				t.Errorf("event %d: marked %v although UTF-8", i, ev.Event.Headers)
			}
		} else {
			want, _ = json.Marshal(b) // base64
			if ev.Event.Headers["content-transfer-encoding"] != "base64" {
				t.Errorf("event %d: headers %v, want content-transfer-encoding base64", i, ev.Event.Headers)
			}
		}
		if !bytes.Equal(ev.Event.Payload, want) {
			t.Errorf("event %d: payload %s, want %s", i, ev.Event.Payload, want)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, raw := range c.raw {
		if !utf8.ValidString(raw) {
			t.Errorf("a frame that is not UTF-8 was sent: %q", raw)
		}
	}
}
