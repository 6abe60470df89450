package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/wire"
)

type httpResult struct {
	status int
	header http.Header
	body   map[string]any
}

func post(t *testing.T, url, body string, h map[string]string) httpResult {
	t.Helper()
	return do(t, http.MethodPost, url, body, h)
}

// do sends a request with headers h and reads its JSON answer.
func do(t *testing.T, method, url, body string, h map[string]string) httpResult {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := httpResult{status: resp.StatusCode, header: resp.Header}
	_ = json.Unmarshal(b, &r.body)
	return r
}

func errCodeOf(r httpResult) string {
	e, _ := r.body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func TestHTTPPublish(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{Token: "tok", MaxPayloadBytes: 1024})
	url := g.http + "/publish/http.t"
	h := map[string]string{
		"Authorization":            "Bearer tok",
		"Cookie":                   "session=secret",
		"X-Other":                  "nope",
		"Content-Type":             "application/json",
		HeaderKey:                  "host:a:1",
		HeaderTags:                 "a, b,,c",
		HeaderCausedBy:             "0190f0e0-0000-7000-8000-000000000001",
		HeaderSID:                  "sess-1",
		HeaderTS:                   "1700000000000",
		HeaderPartition:            "2",
		"Eventhub-Header-Trace-Id": "abc",
	}
	r := post(t, url, `{"hello": "world"}`, h)
	if r.status != 200 {
		t.Fatalf("status %d %v", r.status, r.body)
	}
	id, _ := r.body["id"].(string)
	if id == "" || r.body["seq"] != float64(1) {
		t.Fatalf("body %v", r.body)
	}
	got := make(chan *facade.EventRecord, 1)
	unsub, err := bus.Subscribe(context.Background(), "http.t", "reader", func(_ context.Context, dl facade.Delivery) error {
		e := dl.Event()
		got <- e
		return nil
	}, facade.SubscribeOptions{From: facade.FromEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub.Stop(context.Background())
	var e *facade.EventRecord
	select {
	case e = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("event not delivered")
	}
	if e.ID != id || e.Key != "host:a:1" || e.SID != "sess-1" || e.TS != 1700000000000 || *e.Partition != 2 ||
		!reflect.DeepEqual(e.Tags, []string{"a", "b", "c"}) || !reflect.DeepEqual(e.CausedBy, []string{"0190f0e0-0000-7000-8000-000000000001"}) {
		t.Fatalf("event %+v", e)
	}
	// Only the Eventhub-Header-* headers reach the event.
	if !reflect.DeepEqual(e.Headers, map[string]string{"trace-id": "abc"}) {
		t.Fatalf("headers %v", e.Headers)
	}
	if string(e.Payload) != `{"hello": "world"}` {
		t.Fatalf("payload %s", e.Payload)
	}
}

func TestHTTPPublishErrors(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{Authenticator: testAuth, MaxPayloadBytes: 1024})
	open := newGateway(t, bus, Config{})
	auth := map[string]string{"Authorization": "Bearer admin"}
	cases := []struct {
		name   string
		url    string
		body   string
		h      map[string]string
		status int
		code   string
	}{
		{"no token", g.http + "/publish/a.b", `1`, nil, 401, wire.CodeUnauthorized},
		{"not bearer", g.http + "/publish/a.b", `1`, map[string]string{"Authorization": "Basic YTpi"}, 401, wire.CodeUnauthorized},
		{"bad token", g.http + "/publish/a.b", `1`, map[string]string{"Authorization": "Bearer nope"}, 401, wire.CodeBadToken},
		{"forbidden topic", g.http + "/publish/no.t", `1`, map[string]string{"Authorization": "Bearer limited"}, 403, wire.CodeForbidden},
		{"origin", g.http + "/publish/a.b", `1`, map[string]string{"Authorization": "Bearer admin", "Origin": "https://evil.example.com"}, 403, wire.CodeForbidden},
		{"too large", g.http + "/publish/a.b", `"` + strings.Repeat("x", 2000) + `"`, auth, 413, wire.CodeTooLarge},
		{"bad json", g.http + "/publish/a.b", `{"a":`, auth, 400, wire.CodeBadPayload},
		{"empty body", g.http + "/publish/a.b", ``, auth, 400, wire.CodeBadPayload},
		{"bad topic", g.http + "/publish/a..b", `1`, auth, 400, wire.CodeBadTopic},
		{"bad ts", g.http + "/publish/a.b", `1`, map[string]string{"Authorization": "Bearer admin", HeaderTS: "yesterday"}, 400, wire.CodeBadRequest},
		{"bad id", g.http + "/publish/a.b", `1`, map[string]string{"Authorization": "Bearer admin", HeaderID: "a\tb"}, 400, wire.CodeBadID},
		{"no auth configured", open.http + "/publish/a.b", `{"ok":true}`, nil, 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := post(t, tc.url, tc.body, tc.h)
			if r.status != tc.status || errCodeOf(r) != tc.code {
				t.Fatalf("got %d %v, want %d %s", r.status, r.body, tc.status, tc.code)
			}
			if tc.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
	resp, err := http.Get(g.http + "/publish/a.b")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /publish: %d", resp.StatusCode)
	}
}

// Two connections with different principals keep their own rights.
func TestPrincipalPerConnection(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{Authenticator: testAuth})
	admin := dialAuth(t, g.url, "admin")
	limited := dialAuth(t, g.url, "limited")
	admin2 := dialAuth(t, g.url, "admin") // authenticated after limited
	for range 2 {
		limited.errCode(wire.Frame{Op: wire.OpPublish, Topic: "no.t", Payload: json.RawMessage(`1`)}, wire.CodeForbidden)
		admin.ok(wire.Frame{Op: wire.OpPublish, Topic: "no.t", Payload: json.RawMessage(`1`)})
		admin2.ok(subscribeFrame("no.t", "any", ""))
		limited.errCode(subscribeFrame("no.t", "mine", ""), wire.CodeForbidden)
		limited.ok(wire.Frame{Op: wire.OpPublish, Topic: "ok.t", Payload: json.RawMessage(`1`)})
		admin2.ok(wire.Frame{Op: wire.OpUnsubscribe, Topic: "no.t", Group: "any"})
	}
	// Re-AUTH replaces the connection's principal, and only its own.
	limited.ok(wire.Frame{Op: wire.OpAuth, Token: "admin"})
	limited.ok(wire.Frame{Op: wire.OpPublish, Topic: "no.t", Payload: json.RawMessage(`1`)})
	other := dialAuth(t, g.url, "limited")
	other.errCode(wire.Frame{Op: wire.OpPublish, Topic: "no.t", Payload: json.RawMessage(`1`)}, wire.CodeForbidden)
}

// TestHTTPPublishDuplicateIDAnswersStoredEvent: a retry with the same
// Eventhub-Id is not stored again and is answered with the stored event's
// position and time.
func TestHTTPPublishDuplicateIDAnswersStoredEvent(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	url := g.http + "/publish/dup.http"
	h := map[string]string{HeaderID: "order-42"}
	first := post(t, url, `{"n":1}`, h)
	if first.status != 200 {
		t.Fatalf("first: %d %v", first.status, first.body)
	}
	ts, _ := first.body["ts"].(float64)
	for time.Now().UnixMilli() <= int64(ts)+1 {
		time.Sleep(time.Millisecond) // let the clock pass the first ts
	}
	again := post(t, url, `{"n":1}`, h)
	if again.status != 200 || again.body["seq"] != first.body["seq"] || again.body["ts"] != first.body["ts"] || again.body["id"] != "order-42" {
		t.Fatalf("retry answered %v, first %v", again.body, first.body)
	}
}
