package web_test

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/eventhub/eventhub/web"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     web.Config
		wantErr error
	}{
		{"zero", web.Config{}, nil},
		{"ops prefix", web.Config{OpsBase: "/ops"}, nil},
		{"ops prefix with slash", web.Config{OpsBase: "/ops/"}, nil},
		{"ops other origin", web.Config{OpsBase: "https://ops.example.com:8082/base"}, nil},
		{"ws path", web.Config{WSURL: "/ws"}, nil},
		{"ws absolute", web.Config{WSURL: "wss://hub.example.com/ws"}, nil},
		{"ops scheme-relative", web.Config{OpsBase: "//evil.example.com"}, web.ErrInvalidConfig},
		{"ops relative", web.Config{OpsBase: "ops"}, web.ErrInvalidConfig},
		{"ops javascript", web.Config{OpsBase: "javascript:alert(1)"}, web.ErrInvalidConfig},
		{"ops query", web.Config{OpsBase: "/ops?x=1"}, web.ErrInvalidConfig},
		{"ops userinfo", web.Config{OpsBase: "https://u:p@ops.example.com"}, web.ErrInvalidConfig},
		{"ws http", web.Config{WSURL: "http://hub.example.com/ws"}, web.ErrInvalidConfig},
		{"ws scheme-relative", web.Config{WSURL: "//hub.example.com/ws"}, web.ErrInvalidConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Validate() = %v, want %v", err, tc.wantErr)
			}
			_, err = web.New(tc.cfg)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("New() = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func get(t *testing.T, h http.Handler, method, target string, hdr map[string]string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func TestHandler(t *testing.T) {
	h := web.Handler()
	site, err := web.New(web.Config{})
	if err != nil {
		t.Fatal(err)
	}
	csp := site.ContentSecurityPolicy()
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self' ws: wss:", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") || strings.Contains(csp, "*") || strings.Contains(csp, "http") {
		t.Errorf("policy %q allows more than the page's own origin", csp)
	}

	tests := []struct {
		method, path string
		status       int
		ctype        string
		body         string // a substring of the body
		cors         bool
	}{
		{"GET", "/", 200, "text/html; charset=utf-8", `<script type="module" src="dashboard.js">`, false},
		{"GET", "/client.js", 200, "text/javascript; charset=utf-8", "export class EventHubClient", true},
		{"GET", "/client.d.ts", 200, "application/typescript; charset=utf-8", "export declare class EventHubClient", true},
		{"GET", "/dashboard.js", 200, "text/javascript; charset=utf-8", `from "./client.js"`, false},
		{"GET", "/style.css", 200, "text/css; charset=utf-8", ".status-alive", false},
		{"GET", "/favicon.svg", 200, "image/svg+xml", "<svg", false},
		{"HEAD", "/client.js", 200, "text/javascript; charset=utf-8", "", true},
		{"GET", "/index.html", 404, "", "", false},
		{"GET", "/static/client.js", 404, "", "", false},
		{"GET", "/nope.js", 404, "", "", false},
		{"GET", "/client.js/", 404, "", "", false},
		{"POST", "/", 405, "", "", false},
		{"DELETE", "/client.js", 405, "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			res := get(t, h, tc.method, tc.path, nil)
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", res.StatusCode, tc.status)
			}
			if got := res.Header.Get("Content-Security-Policy"); got != csp {
				t.Errorf("Content-Security-Policy %q, want %q", got, csp)
			}
			if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q", got)
			}
			switch tc.status {
			case 200:
				if got := res.Header.Get("Content-Type"); got != tc.ctype {
					t.Errorf("Content-Type %q, want %q", got, tc.ctype)
				}
				if got := res.Header.Get("Cache-Control"); got != "no-cache" {
					t.Errorf("Cache-Control %q, want no-cache", got)
				}
				if res.Header.Get("ETag") == "" {
					t.Error("no ETag")
				}
				if tc.method == "HEAD" && len(body) != 0 {
					t.Errorf("HEAD has a body of %d bytes", len(body))
				}
				if !strings.Contains(string(body), tc.body) {
					t.Errorf("body lacks %q", tc.body)
				}
				if got := res.Header.Get("Access-Control-Allow-Origin"); (got == "*") != tc.cors {
					t.Errorf("Access-Control-Allow-Origin %q, want cross-origin %v", got, tc.cors)
				}
			case 405:
				if got := res.Header.Get("Allow"); got != "GET, HEAD" {
					t.Errorf("Allow %q", got)
				}
			}
		})
	}
}

// TestHandlerServesEveryFile checks that every file under static/ is served
// with its own bytes (index.html with its configuration filled in), except
// the files that make static/ the client's npm package.
func TestHandlerServesEveryFile(t *testing.T) {
	h := web.Handler()
	files, err := fs.Glob(os.DirFS("static"), "*")
	if err != nil || len(files) < 6 {
		t.Fatalf("static files %v (%v)", files, err)
	}
	for _, name := range files {
		want, err := os.ReadFile("static/" + name)
		if err != nil {
			t.Fatal(err)
		}
		path := "/" + name
		switch name {
		case "index.html":
			path = "/"
		case "console.html":
			path = "/console"
		}
		res := get(t, h, "GET", path, nil)
		got, _ := io.ReadAll(res.Body)
		if name == "package.json" || name == "README.md" {
			// The npm package's own files are not part of the site.
			if res.StatusCode != http.StatusNotFound {
				t.Errorf("%s: status %d, want 404", path, res.StatusCode)
			}
			continue
		}
		if res.StatusCode != 200 {
			t.Errorf("%s: status %d", path, res.StatusCode)
			continue
		}
		if name == "index.html" || name == "console.html" {
			if strings.Contains(string(got), "{{") {
				t.Errorf("%s: unfilled template action", path)
			}
			continue
		}
		if string(got) != string(want) {
			t.Errorf("%s: body differs from static/%s", path, name)
		}
	}
}

func TestHandlerRevalidation(t *testing.T) {
	h := web.Handler()
	res := get(t, h, "GET", "/client.js", nil)
	etag := res.Header.Get("ETag")
	if !strings.HasPrefix(etag, `"`) || !strings.HasSuffix(etag, `"`) || len(etag) < 10 {
		t.Fatalf("ETag %q is not a strong validator", etag)
	}
	res = get(t, h, "GET", "/client.js", map[string]string{"If-None-Match": etag})
	if res.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match with the current ETag: status %d, want 304", res.StatusCode)
	}
	res = get(t, h, "GET", "/client.js", map[string]string{"If-None-Match": `"stale"`})
	if res.StatusCode != http.StatusOK {
		t.Errorf("If-None-Match with another ETag: status %d, want 200", res.StatusCode)
	}
	if other := get(t, h, "GET", "/style.css", nil).Header.Get("ETag"); other == etag {
		t.Errorf("client.js and style.css share the ETag %s", etag)
	}
}

func TestIndexConfiguration(t *testing.T) {
	tests := []struct {
		name       string
		cfg        web.Config
		ops, ws    string // the meta tags' content, as written in the HTML
		connectSrc string
	}{
		{"zero", web.Config{}, `content=""`, `content=""`, "connect-src 'self' ws: wss:;"},
		{"prefix", web.Config{OpsBase: "/ops/", WSURL: "/gw/ws"}, `content="/ops"`, `content="/gw/ws"`, "connect-src 'self' ws: wss:;"},
		{"escaped", web.Config{OpsBase: `/a"><script>x</script>`}, `content="/a&#34;&gt;&lt;script&gt;x&lt;/script&gt;"`, `content=""`, "connect-src 'self' ws: wss:;"},
		{"other origin", web.Config{OpsBase: "https://ops.example.com:8082/x"}, `content="https://ops.example.com:8082/x"`, `content=""`,
			"connect-src 'self' ws: wss: https://ops.example.com:8082;"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			site, err := web.New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			res := get(t, site, "GET", "/", nil)
			body, _ := io.ReadAll(res.Body)
			html := string(body)
			if want := `<meta name="eventhub-ops-base" ` + tc.ops + `>`; !strings.Contains(html, want) {
				t.Errorf("index lacks %s", want)
			}
			if want := `<meta name="eventhub-ws-url" ` + tc.ws + `>`; !strings.Contains(html, want) {
				t.Errorf("index lacks %s", want)
			}
			if strings.Contains(html, "<script>") {
				t.Error("index has an inline script")
			}
			if got := res.Header.Get("Content-Security-Policy"); !strings.Contains(got, tc.connectSrc) {
				t.Errorf("policy %q lacks %q", got, tc.connectSrc)
			}
		})
	}
}

func TestWebSocketPassThrough(t *testing.T) {
	var hits int
	ws := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		w.WriteHeader(http.StatusSwitchingProtocols)
	})
	site, err := web.New(web.Config{WebSocket: ws})
	if err != nil {
		t.Fatal(err)
	}
	upgrade := map[string]string{"Connection": "keep-alive, Upgrade", "Upgrade": "WebSocket"}
	if res := get(t, site, "GET", "/", upgrade); res.StatusCode != http.StatusSwitchingProtocols || hits != 1 {
		t.Errorf("upgrade of /: status %d, %d hits, want it passed to Config.WebSocket", res.StatusCode, hits)
	}
	if res := get(t, site, "GET", "/client.js", upgrade); res.StatusCode != http.StatusOK || hits != 1 {
		t.Errorf("upgrade of /client.js: status %d, %d hits, want the file", res.StatusCode, hits)
	}
	if res := get(t, site, "GET", "/", nil); res.StatusCode != http.StatusOK || hits != 1 {
		t.Errorf("plain GET /: status %d, %d hits, want the page", res.StatusCode, hits)
	}
	// Without Config.WebSocket an upgrade of / gets the page.
	if res := get(t, web.Handler(), "GET", "/", upgrade); res.StatusCode != http.StatusOK {
		t.Errorf("upgrade of / without Config.WebSocket: status %d, want 200", res.StatusCode)
	}
}
