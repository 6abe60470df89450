package hub_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/hub"
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
}

// TestAdminAPINeedsAdminScope: with auth on, every admin call is refused
// without a token (401) and with a token that lacks the admin scope, however
// wide its topic rights (403), on the ops port and under /ops/ of the HTTP
// port; an admin token gets through. Every call is audited with the
// principal.
func TestAdminAPINeedsAdminScope(t *testing.T) {
	logs := &lockedBuffer{}
	h := startHub(t, hub.Config{
		Memory: true, NATSPort: -1, WSPort: -1,
		Auth:   auth.Config{JWT: auth.VerifierConfig{Secret: secret}},
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
	})
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
