package hub_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/hub"
)

// TestForeignHostRefusedWithoutAuth: with auth off, a page that rebinds its
// own name to 127.0.0.1 sends its name as Host (and a matching Origin).
// Every port refuses it; loopback names and configured names pass.
func TestForeignHostRefusedWithoutAuth(t *testing.T) {
	h := startHub(t, hub.Config{Server: hub.ServerConfig{AllowedHosts: []string{"hub.internal"}}})
	type request struct {
		name, method, port, path string
	}
	requests := []request{
		{"publish", http.MethodPost, "http", "/publish/dns.t"},
		{"replay", http.MethodGet, "ops", "/replay?topic=dns.t"},
		{"ops under http", http.MethodGet, "http", "/ops/topics"},
		{"dashboard", http.MethodGet, "http", "/"},
		{"metrics", http.MethodGet, "ops", "/metrics"},
	}
	do := func(r request, host string) int {
		addr := h.Addr(r.port)
		req, _ := http.NewRequestWithContext(t.Context(), r.method, "http://"+addr+r.path, strings.NewReader(`{"x":1}`))
		req.Host = host + addr[strings.LastIndexByte(addr, ':'):]
		req.Header.Set("Origin", "http://"+req.Host)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, r := range requests {
		if code := do(r, "evil.example"); code != http.StatusMisdirectedRequest {
			t.Errorf("%s with a foreign Host: %d, want 421", r.name, code)
		}
		for _, ok := range []string{"127.0.0.1", "localhost", "hub.internal"} {
			if code := do(r, ok); code >= 400 {
				t.Errorf("%s with Host %s: %d", r.name, ok, code)
			}
		}
	}
	upgrade := func(port, path, host string) (int, error) {
		addr := h.Addr(port)
		hdr := http.Header{}
		hdr.Set("Host", host+addr[strings.LastIndexByte(addr, ':'):])
		hdr.Set("Origin", "http://"+hdr.Get("Host"))
		d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
		c, resp, err := d.Dial("ws://"+addr+path, hdr)
		if c != nil {
			c.Close()
		}
		if resp == nil {
			return 0, err
		}
		return resp.StatusCode, err
	}
	for _, p := range []struct{ port, path string }{{"ws", "/"}, {"http", "/ws"}} {
		if code, _ := upgrade(p.port, p.path, "evil.example"); code != http.StatusMisdirectedRequest {
			t.Errorf("WebSocket on %s%s with a foreign Host: %d, want 421", p.port, p.path, code)
		}
		if code, err := upgrade(p.port, p.path, "localhost"); code != http.StatusSwitchingProtocols {
			t.Errorf("WebSocket on %s%s with Host localhost: %d %v", p.port, p.path, code, err)
		}
	}
}

// TestMetricsNeedAnOperatorToken: metrics name every topic and group, so a
// token scoped to some topics may not read them; the static token, the
// admin scope and the metrics scope may.
func TestMetricsNeedAnOperatorToken(t *testing.T) {
	const static = "a-static-token-of-length"
	h := startHub(t, hub.Config{Auth: auth.Config{Token: static, JWT: auth.VerifierConfig{Secret: secret}}})
	url := "http://" + h.Addr("ops") + "/metrics"
	for _, tc := range []struct {
		name  string
		token string
		want  int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"bad token", "not-a-token-at-all", http.StatusUnauthorized},
		{"topic scopes", mint(t, time.Minute, "subscribe:orders.*", "publish:**"), http.StatusForbidden},
		{"metrics scope", mint(t, time.Minute, "metrics"), http.StatusOK},
		{"admin scope", mint(t, time.Minute, "admin"), http.StatusOK},
		{"static token", static, http.StatusOK},
	} {
		if code, body := get(t, url, tc.token); code != tc.want {
			t.Errorf("%s: %d, want %d (%.200s)", tc.name, code, tc.want, body)
		}
	}
}
