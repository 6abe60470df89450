package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/eventhub/eventhub/client"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/wire"
)

// TestCorrelationIDFoundWhateverTheWayIn: an event published with a
// correlationId header over HTTP (where the header name is stored
// lower-cased), over WebSocket and through the Go client is found by
// /replay?correlationId= and eventhub export -correlation-id.
func TestCorrelationIDFoundWhateverTheWayIn(t *testing.T) {
	h, err := hub.Start(t.Context(), hub.Config{NATS: hub.NATSConfig{Memory: true, Port: 0}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Shutdown(t.Context()) })
	const topic = "corr.orders"

	// HTTP: Go canonicalises the name to Eventhub-Header-Correlationid; the
	// event's header is "correlationid".
	for i, id := range []string{"req-1", "req-other"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+h.Addr("http")+"/publish/"+topic, strings.NewReader(`{"via":"http"}`))
		req.Header.Set("Eventhub-Header-correlationId", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("HTTP publish %d: %d %s", i, resp.StatusCode, b)
		}
	}

	// WebSocket: a PUBLISH frame, the header name in yet another case.
	ws, _, err := (&websocket.Dialer{HandshakeTimeout: 5 * time.Second}).Dial("ws://"+h.Addr("ws"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"op":"AUTH","token":""}`)); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"op":"PUBLISH","corr":"p1","topic":"`+topic+`","payload":{"via":"ws"},"opts":{"headers":{"CorrelationID":"req-1"}}}`)); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for _, op := range []string{"AUTH", "PUBLISH"} {
		var f wire.Frame
		if err := ws.ReadJSON(&f); err != nil || f.Op != wire.OpOK {
			t.Fatalf("WebSocket %s: %+v %v", op, f, err)
		}
	}

	// The Go client, with the name as the reference clients write it.
	c, err := client.Dial(t.Context(), "ws://"+h.Addr("ws"), client.Config{NoReconnect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Publish(t.Context(), topic, json.RawMessage(`{"via":"client"}`), facade.PublishOptions{Headers: map[string]string{"correlationId": "req-1"}}); err != nil {
		t.Fatal(err)
	}

	wantVia := func(t *testing.T, ndjson string) {
		t.Helper()
		var via []string
		for l := range strings.SplitSeq(strings.TrimSpace(ndjson), "\n") {
			var e facade.EventRecord
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			via = append(via, string(e.Payload))
		}
		if want := []string{`{"via":"http"}`, `{"via":"ws"}`, `{"via":"client"}`}; strings.Join(via, " ") != strings.Join(want, " ") {
			t.Fatalf("found %v, want %v", via, want)
		}
	}

	t.Run("replay", func(t *testing.T) {
		resp, err := http.Get("http://" + h.Addr("ops") + "/replay?" + url.Values{"topic": {topic}, "correlationId": {"req-1"}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("replay: %d %s", resp.StatusCode, b)
		}
		wantVia(t, string(b))
	})
	t.Run("export", func(t *testing.T) {
		var out, errOut bytes.Buffer
		if err := run(t.Context(), []string{"export", "-nats-url", h.Bus.Server().ClientURL(), "-topic", topic, "-correlation-id", "req-1"}, env(nil), &out, &errOut); err != nil {
			t.Fatalf("%v\n%s", err, errOut.String())
		}
		wantVia(t, out.String())
	})
}
