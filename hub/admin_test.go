package hub_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/ops"
)

// lockedBuffer collects a hub's log lines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// adminCalls is one request to every admin route.
var adminCalls = []struct{ method, path string }{
	{"GET", "/admin/groups"},
	{"POST", "/admin/groups/seek?topic=adm.t&group=g&to=earliest"},
	{"POST", "/admin/groups/pause?topic=adm.t&group=g"},
	{"POST", "/admin/groups/resume?topic=adm.t&group=g"},
	{"DELETE", "/admin/groups?topic=adm.t&group=g"},
	{"GET", "/admin/topics?topic=adm.t"},
	{"POST", "/admin/topics?topic=adm.t"},
	{"POST", "/admin/topics/purge?topic=adm.t"},
	{"DELETE", "/admin/topics?topic=adm.t"},
	{"GET", "/admin/deadletters?topic=adm.t"},
	{"POST", "/admin/deadletters/redrive?topic=adm.t&all=true"},
	{"POST", "/admin/deadletters/discard?topic=adm.t&all=true"},
	{"GET", "/admin/events?topic=adm.t&seq=1"},
	{"GET", "/admin/events/browse?topic=adm.t"},
	{"GET", "/admin/sessions"},
	{"POST", "/admin/sessions/disconnect?id=1"},
	{"DELETE", "/admin/keys?topic=adm.t&key=k"},
}

// TestAdminCallsCoverEveryRoute: adminCalls has a call for every admin
// route the ops handler registers.
func TestAdminCallsCoverEveryRoute(t *testing.T) {
	called := map[string]bool{}
	for _, c := range adminCalls {
		called[c.method+" "+strings.Split(c.path, "?")[0]] = true
	}
	for _, pattern := range ops.AdminRoutes() {
		if !called[pattern] {
			t.Errorf("admin route %s has no call in adminCalls", pattern)
		}
	}
}

// TestAdminAPINeedsAdminScope: with auth on, every admin call is refused
// without a token (401) and with a token that lacks the admin scope, however
// wide its topic rights (403), on the ops port and under /ops/ of the HTTP
// port; an admin token gets through. Every call is audited with the
// principal.
func TestAdminAPINeedsAdminScope(t *testing.T) {
	logs := &lockedBuffer{}
	h := startHub(t, hub.Config{NATS: hub.NATSConfig{Memory: true, Port: -1}, Server: hub.ServerConfig{WSPort: -1}, Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	sign := func(subject string, scopes ...string) string {
		tok, err := auth.MintHS256(secret, auth.MintClaims{Subject: subject, Scopes: scopes, TTL: time.Minute}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	wide := sign("wide-user", "*:**", "metrics")
	admin := sign("ops-admin", "admin")
	for _, base := range []string{"http://" + h.Addr("ops"), "http://" + h.Addr("http") + "/ops"} {
		for _, c := range adminCalls {
			for _, tc := range []struct {
				token string
				want  int
			}{{"", http.StatusUnauthorized}, {wide, http.StatusForbidden}, {"not-a-token", http.StatusUnauthorized}} {
				status, body := call(t, c.method, base+c.path, tc.token)
				if status != tc.want || !strings.Contains(body, `"code"`) {
					t.Errorf("%s %s%s with token %.8q: %d %s, want %d", c.method, base, c.path, tc.token, status, body, tc.want)
				}
			}
		}
	}
	// The admin token gets through (what each call does is ops's tests').
	for _, c := range adminCalls {
		status, body := call(t, c.method, "http://"+h.Addr("ops")+c.path, admin)
		if status == http.StatusUnauthorized || status == http.StatusForbidden {
			t.Errorf("%s %s with the admin token: %d %s", c.method, c.path, status, body)
		}
	}
	out := logs.String()
	for _, want := range []string{`"msg":"admin call refused"`, `"principal":"wide-user"`, `"msg":"admin call"`, `"principal":"ops-admin"`, `"path":"/admin/topics/purge"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the log has no %s", want)
		}
	}
	if strings.Contains(out, admin) || strings.Contains(out, wide) {
		t.Error("a token is in the log")
	}
}

func call(t *testing.T, method, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestFanInGroupInTheAdminAPI: with auth on, a fan-in group over a topic
// family, made by a client through the gateway, is in the group list next
// to the others, and /cursors and /lag answer for it to a token that may
// read the family; a token that may read only part of it is refused.
func TestFanInGroupInTheAdminAPI(t *testing.T) {
	h := startHub(t, hub.Config{NATS: hub.NATSConfig{Memory: true, Port: -1}, Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}, Bus: jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "fan.**", Stream: "FAN"}}}})
	ctx := t.Context()
	sign := func(scopes ...string) string {
		tok, err := auth.MintHS256(secret, auth.MintClaims{Subject: "fan-user", Scopes: scopes, TTL: time.Minute}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if _, err := h.Bus.Publish(ctx, "fan.a", []byte(`{}`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, h, sign("subscribe:fan.**"))
	if _, err := c.Subscribe(ctx, "fan.*", "billing", func(context.Context, facade.Delivery) error { return nil }, facade.SubscribeOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.Bus.SetCursor(ctx, "fan.a", "audit", facade.CursorPosition{}); err != nil {
		t.Fatal(err)
	}
	ops := "http://" + h.Addr("ops")
	status, body := call(t, "GET", ops+"/admin/groups", sign("admin"))
	if status != http.StatusOK || !strings.Contains(body, `"topic":"fan.*","group":"billing"`) || !strings.Contains(body, `"topic":"fan.a","group":"audit"`) {
		t.Fatalf("GET /admin/groups: %d %s", status, body)
	}
	reader := sign("subscribe:fan.**")
	for _, path := range []string{"/cursors?topic=fan.*", "/lag?topic=fan.*&group=billing"} {
		if status, body := call(t, "GET", ops+path, reader); status != http.StatusOK || !strings.Contains(body, "billing") {
			t.Errorf("GET %s: %d %s", path, status, body)
		}
		if status, body := call(t, "GET", ops+path, sign("subscribe:fan.a")); status != http.StatusForbidden {
			t.Errorf("GET %s with rights on fan.a only: %d %s, want 403", path, status, body)
		}
	}
}
