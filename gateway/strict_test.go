package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/wire"
)

// TestInvalidUTF8RefusedOnEveryWayIn: the WebSocket, HTTP and the Go API
// refuse a payload that browsers could never receive.
func TestInvalidUTF8RefusedOnEveryWayIn(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	c := dialAuth(t, g.url, "")
	r := c.request(wire.Frame{Op: wire.OpPublish, Topic: "utf.t", Payload: json.RawMessage("\"\xff\xfe\"")})
	if r.Op != wire.OpErr || r.Code != wire.CodeBadPayload {
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
	c.ok(wire.Frame{Op: wire.OpPublish, Topic: "utf.t", Payload: json.RawMessage(`"fine"`)})
}

// TestPublishTSValidatedAlike: a negative ts is refused on the WebSocket as
// on HTTP.
func TestPublishTSValidatedAlike(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	c := dialAuth(t, g.url, "")
	c.errCode(wire.Frame{Op: wire.OpPublish, Topic: "ts.t", Payload: json.RawMessage(`1`), Opts: json.RawMessage(`{"ts":-1}`)}, wire.CodeBadRequest)
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
