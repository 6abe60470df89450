package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
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
// case-variant key can make the hub read another frame than a proxy.
func FuzzDecodeExact(f *testing.F) {
	for _, s := range []string{
		`{"op":"PUBLISH","topic":"a","Topic":"b","payload":1}`,
		`{"op":"ACK","topic":"a","group":"g","id":"x","topic":"b"}`,
		`{"OP":"AUTH"}`,
		`{"op":"AUTH","token":"t","corr":"1"}`,
		`{"op":"SUBSCRIBE","topic":"a","group":"g","grOUP":"h"}`,
		`{"op":"ACK","topic":"a","group":"g","id":"x","to\u0070ic":"b"}`,
		"{\"op\":\"AUTH\",\"corr\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fr Frame
		if Decode(data, &fr) != nil {
			return
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(data, &fields); err != nil {
			t.Fatalf("accepted %q, which is not an object: %v", data, err)
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
	})
}
