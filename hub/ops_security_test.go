package hub_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eventhub/eventhub/acl"
	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
)

// TestAdminRefusesCrossSiteActions: with auth off (loopback), a page of
// another site the operator visits could POST to the admin API (its
// arguments are in the query: no preflight), on the ops port and under
// /ops on the HTTP port. Browsers say where a request comes from; such
// actions are refused, while the same action from the hub's own page or
// from curl goes through.
func TestAdminRefusesCrossSiteActions(t *testing.T) {
	h := startHub(t, hub.Config{NATS: hub.NATSConfig{Memory: true, Port: -1}, Server: hub.ServerConfig{WSPort: -1}})
	for _, base := range []string{"http://" + h.Addr("ops"), "http://" + h.Addr("http") + "/ops"} {
		for _, tc := range []struct {
			name    string
			headers map[string]string
			want    int
		}{
			{"cross-site page", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
			{"another origin, no fetch metadata", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
			{"same-site page", map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
			{"the hub's own page", map[string]string{"Origin": strings.TrimSuffix(base, "/ops"), "Sec-Fetch-Site": "same-origin"}, http.StatusOK},
			{"curl", nil, http.StatusOK},
		} {
			if _, err := h.Bus.Publish(t.Context(), "csrf.t", json.RawMessage(`1`), facade.PublishOptions{}); err != nil {
				t.Fatal(err)
			}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/admin/topics/purge?topic=csrf.t", nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s, %s: %d %s, want %d", base, tc.name, resp.StatusCode, b, tc.want)
			}
		}
	}
}

// TestRestrictedStaticTokenIsNoAdmin: a static token restricted by a
// StaticPolicy holds no scope: no admin API and no /metrics, as natively.
func TestRestrictedStaticTokenIsNoAdmin(t *testing.T) {
	const tok = "static-token-0123456789"
	h := startHub(t, hub.Config{NATS: hub.NATSConfig{Memory: true, Port: -1}, Server: hub.ServerConfig{WSPort: -1}, Auth: auth.Config{
		Token:        tok,
		StaticPolicy: &acl.Policy{Rules: []acl.Rule{{Effect: acl.EffectAllow, Action: acl.ActionPublish, Topics: []string{"only.this"}}}},
	}})
	if _, err := h.Bus.Publish(t.Context(), "secret.t", json.RawMessage(`1`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if status, body := call(t, "POST", "http://"+h.Addr("ops")+"/admin/topics/purge?topic=secret.t", tok); status != http.StatusForbidden {
		t.Errorf("restricted static token, purge: %d %s, want 403", status, body)
	}
	if status, body := call(t, "GET", "http://"+h.Addr("ops")+"/metrics", tok); status != http.StatusForbidden {
		t.Errorf("restricted static token, /metrics: %d %.60s, want 403", status, body)
	}
}

// TestTopicsListsWhatTheTokenMaySee: /topics lists the topics the token
// may subscribe to, and no stream of others.
func TestTopicsListsWhatTheTokenMaySee(t *testing.T) {
	h := startHub(t, hub.Config{NATS: hub.NATSConfig{Memory: true, Port: -1}, Server: hub.ServerConfig{WSPort: -1}, Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}})
	for _, topic := range []string{"secret.payroll", "open.news"} {
		if _, err := h.Bus.Publish(t.Context(), topic, json.RawMessage(`1`), facade.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	status, body := call(t, "GET", "http://"+h.Addr("ops")+"/topics", mint(t, time.Minute, "subscribe:open.**"))
	if status != http.StatusOK || strings.Contains(body, "secret.payroll") || !strings.Contains(body, "open.news") {
		t.Errorf("/topics for a subscribe:open.** token: %d %s", status, body)
	}
}

// TestSSEOnTheHTTPPort: GET /sse/{topic} is served on the HTTP port too,
// as docs/protocol.md shows it.
func TestSSEOnTheHTTPPort(t *testing.T) {
	h := startHub(t, hub.Config{NATS: hub.NATSConfig{Memory: true, Port: -1}, Server: hub.ServerConfig{WSPort: -1}})
	if _, err := h.Bus.Publish(t.Context(), "sse.t", json.RawMessage(`1`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+h.Addr("http")+"/sse/sse.t", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Errorf("GET /sse/sse.t on the HTTP port: %d %s", resp.StatusCode, ct)
	}
}
