package hub_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/outbox"
)

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMetricsEndpoint(t *testing.T) {
	h := startHub(t, hub.Config{})
	if _, err := h.Bus.Publish(t.Context(), "ops.m", json.RawMessage(`1`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, "http://"+h.Addr("ops")+"/readyz", ""); code != 200 || !strings.Contains(body, "sync default") {
		t.Fatalf("readyz %d %s", code, body)
	}
	if code, body := get(t, "http://"+h.Addr("ops")+"/topics", ""); code != 200 || !strings.Contains(body, "ops.m") {
		t.Fatalf("topics %d %s", code, body)
	}
	code, body := get(t, "http://"+h.Addr("ops")+"/metrics", "")
	if code != 200 || !strings.Contains(body, `events_published_total{topic="ops.m"} 1`) || !strings.Contains(body, "nats_jetstream_up 1") {
		t.Fatalf("metrics %d:\n%.2000s", code, body)
	}
}

func TestOpsRequireAuthWhenOn(t *testing.T) {
	const token = "a-static-token-of-length"
	h := startHub(t, hub.Config{Auth: auth.Config{Token: token}})
	if code, _ := get(t, "http://"+h.Addr("ops")+"/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("metrics without a token: %d", code)
	}
	if code, _ := get(t, "http://"+h.Addr("ops")+"/metrics", "wrong-token-of-some-length"); code != http.StatusUnauthorized {
		t.Fatalf("metrics with a wrong token: %d", code)
	}
	if code, _ := get(t, "http://"+h.Addr("ops")+"/metrics", token); code != 200 {
		t.Fatalf("metrics with the token: %d", code)
	}
	if code, _ := get(t, "http://"+h.Addr("ops")+"/healthz", ""); code != 200 {
		t.Fatalf("healthz: %d", code)
	}
}

func TestOutboxDrainerInsideHub(t *testing.T) {
	db := filepath.Join(t.TempDir(), "svc.db")
	h := startHub(t, hub.Config{Outbox: hub.OutboxConfig{DB: db, Drainer: outbox.Config{PollInterval: 20 * time.Millisecond}}})
	got := make(chan *facade.EventRecord, 1)
	unsub, err := h.Bus.Subscribe(t.Context(), "orders.created", "audit", func(_ context.Context, dl facade.Delivery) error {
		e := dl.Event()
		got <- e
		return nil
	}, facade.SubscribeOptions{From: facade.FromEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub.Stop(context.Background())

	// The service side: its own connection to the same database.
	st, err := outbox.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tx, err := st.DB().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := st.Add(t.Context(), tx, outbox.Record{Topic: "orders.created", Payload: json.RawMessage(`{"order":7}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-got:
		if e.ID != id || string(e.Payload) != `{"order":7}` {
			t.Fatalf("event %s %s, want %s", e.ID, e.Payload, id)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the hub's drainer did not publish the committed record")
	}
	code, body := get(t, "http://"+h.Addr("ops")+"/metrics", "")
	if code != 200 || !strings.Contains(body, "outbox_sent_total") {
		t.Fatalf("outbox metrics missing: %d", code)
	}
}

func TestDashboardServedOnHTTPPort(t *testing.T) {
	h := startHub(t, hub.Config{})
	for path, want := range map[string]string{"/": "<html", "/client.js": "export", "/ops/healthz": `"ok"`} {
		code, body := get(t, "http://"+h.Addr("http")+path, "")
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("GET %s: %d %.200s", path, code, body)
		}
	}
}

// TestUnknownOpsPathIsJSONNotFound: the ops port, and /ops/ on the HTTP
// port, answer a path that is no endpoint as every other error, in JSON.
func TestUnknownOpsPathIsJSONNotFound(t *testing.T) {
	h := startHub(t, hub.Config{})
	for _, url := range []string{"http://" + h.Addr("ops") + "/no-such", "http://" + h.Addr("http") + "/ops/no-such"} {
		code, body := get(t, url, "")
		if code != http.StatusNotFound || !strings.Contains(body, `"code":"not_found"`) {
			t.Errorf("%s: %d %q", url, code, body)
		}
	}
}

// TestPortInUseNamesItsSetting: a taken port stops the start with an error
// that names the flag, environment variable and file key of that port.
func TestPortInUseNamesItsSetting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		name string
		cfg  hub.Config
		want string
	}{
		{"ws", hub.Config{Server: hub.ServerConfig{WSPort: taken}}, "-ws-port, $WS_PORT, server.wsPort"},
		{"http", hub.Config{Server: hub.ServerConfig{HTTPPort: taken}}, "-http-port, $HTTP_PORT, server.httpPort"},
		{"ops", hub.Config{Server: hub.ServerConfig{OpsPort: taken}}, "-ops-port, $OPS_PORT, server.opsPort"},
		{"nats", hub.Config{NATS: hub.NATSConfig{Port: taken}}, "-nats-port, $EVENTHUB_NATS_PORT, nats.port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.NATS.Memory = true
			h, err := hub.Start(t.Context(), tc.cfg)
			if err == nil {
				_ = h.Shutdown(t.Context())
				t.Fatal("started on a taken port")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "in use") {
				t.Fatalf("err %v, want one naming %s", err, tc.want)
			}
			if tc.name != "nats" && !errors.Is(err, hub.ErrPortInUse) {
				t.Fatalf("err %v is not ErrPortInUse", err)
			}
		})
	}
}

// TestPublishWrongPathOrMethodIsJSON: on the WebSocket and HTTP ports, a
// publish or event-stream path with another method answers 405 with Allow,
// and a path no endpoint has 404, both in the JSON error shape.
func TestPublishWrongPathOrMethodIsJSON(t *testing.T) {
	h := startHub(t, hub.Config{NATS: hub.NATSConfig{Memory: true}})
	for _, port := range []string{"ws", "http"} {
		base := "http://" + h.Addr(port)
		for _, tc := range []struct {
			method, path string
			status       int
			code, allow  string
		}{
			{"POST", "/publish/a/b", http.StatusNotFound, "not_found", ""},
			{"GET", "/publish/x", http.StatusMethodNotAllowed, "method_not_allowed", "POST, DELETE"},
			{"POST", "/sse/x", http.StatusMethodNotAllowed, "method_not_allowed", "GET"},
			{"GET", "/sse/a/b", http.StatusNotFound, "not_found", ""},
		} {
			req, _ := http.NewRequestWithContext(t.Context(), tc.method, base+tc.path, strings.NewReader("{}"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body struct{ Error struct{ Code, Msg string } }
			err = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || err != nil || body.Error.Code != tc.code || resp.Header.Get("Allow") != tc.allow ||
				resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%s: %s %s: %d %q (Allow %q, %s, %v), want %d %s", port, tc.method, tc.path, resp.StatusCode,
					body.Error.Code, resp.Header.Get("Allow"), resp.Header.Get("Content-Type"), err, tc.status, tc.code)
			}
		}
	}
}
