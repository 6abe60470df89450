package hub_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
)

// docCurl finds the one curl command of page that contains marker (joined
// across its backslash-continued lines) and turns it into a request: -X
// sets the method, each -H a header, the one URL (after vars are expanded
// and "http://127.0.0.1:8090" is replaced by base) the target.
func docCurl(t *testing.T, page, marker string, vars map[string]string, base string) *http.Request {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	var cmd string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "curl ") && strings.Contains(line, marker) {
			if cmd != "" {
				t.Fatalf("%s: more than one curl command with %q", page, marker)
			}
			cmd = line
		}
	}
	if cmd == "" {
		t.Fatalf("%s: no curl command with %q", page, marker)
	}
	for k, v := range vars {
		cmd = strings.ReplaceAll(cmd, "$"+k, v)
	}
	cmd = strings.ReplaceAll(cmd, "http://127.0.0.1:8090", base)
	// Words: '…', "…" or bare.
	words := regexp.MustCompile(`'[^']*'|"[^"]*"|\S+`).FindAllString(cmd, -1)
	method, url := http.MethodGet, ""
	h := http.Header{}
	for i := 1; i < len(words); i++ {
		w := strings.Trim(words[i], `'"`)
		switch words[i] {
		case "-s", "-N":
		case "-X":
			i++
			method = words[i]
		case "-H":
			i++
			k, v, ok := strings.Cut(strings.Trim(words[i], `'"`), ":")
			if !ok {
				t.Fatalf("%s: header %s", page, words[i])
			}
			h.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		default:
			if url != "" || !strings.HasPrefix(w, "http") {
				t.Fatalf("%s: the test does not know %q in %s", page, words[i], cmd)
			}
			url = w
		}
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	return req
}

// TestKeyDeleteDocCommands runs the delete commands of docs/keys.md (HTTP,
// on the gateway's port and on the HTTP port) and docs/http-api.md (admin API)
// against a hub: each stores a tombstone, after which the key has no value.
func TestKeyDeleteDocCommands(t *testing.T) {
	const token = "s3cret-static-token-for-docs"
	h := startHub(t, hub.Config{NATS: hub.NATSConfig{Memory: true, Port: -1}, Auth: auth.Config{Token: token}})
	ops := "http://" + h.Addr("ops")
	for _, tc := range []struct {
		page, marker, key string
		vars              map[string]string
		base              string
	}{
		{"../docs/keys.md", "-X DELETE", "host:stt:1234", nil, "http://" + h.Addr("ws")},
		// The HTTP port serves the same route.
		{"../docs/keys.md", "-X DELETE", "host:stt:1234", nil, "http://" + h.Addr("http")},
		{"../docs/http-api.md", "/admin/keys?", "host-a:api:101", map[string]string{"OPS": ops, "H": "Authorization: Bearer " + token}, ""},
	} {
		for range 2 {
			if _, err := h.Bus.Publish(t.Context(), "process.state", json.RawMessage(`{"status":"alive"}`), facade.PublishOptions{Key: tc.key}); err != nil {
				t.Fatal(err)
			}
		}
		req := docCurl(t, tc.page, tc.marker, tc.vars, tc.base)
		if tc.vars == nil {
			req.Header.Set("Authorization", strings.Replace(req.Header.Get("Authorization"), "s3cret", token, 1))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s %s: %d %s", tc.page, req.Method, req.URL, resp.StatusCode, body)
		}
		got, err := h.Bus.LatestByKey(t.Context(), "process.state", []string{tc.key})
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := got[tc.key]; ok {
			t.Fatalf("%s: after the delete the key has %+v", tc.page, e)
		}
	}
}

// TestKeyWatchDocCommand runs the SSE watch command of docs/keys.md against
// a hub: the current values of the prefix's keys come before the ready
// event, other keys do not.
func TestKeyWatchDocCommand(t *testing.T) {
	const token = "s3cret-static-token-for-docs"
	h := startHub(t, hub.Config{NATS: hub.NATSConfig{Memory: true, Port: -1}, Auth: auth.Config{Token: token}})
	for _, key := range []string{"host:stt:1", "web:nginx:2"} {
		if _, err := h.Bus.Publish(t.Context(), "process.state", json.RawMessage(`{"status":"alive"}`), facade.PublishOptions{Key: key}); err != nil {
			t.Fatal(err)
		}
	}
	req := docCurl(t, "../docs/keys.md", "key_prefix=", nil, "http://"+h.Addr("ws"))
	req.Header.Set("Authorization", strings.Replace(req.Header.Get("Authorization"), "s3cret", token, 1))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d", req.URL, resp.StatusCode)
	}
	var got []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != "event: ready" {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			got = append(got, data)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("no ready event: %v", err)
	}
	if len(got) != 1 || !strings.Contains(got[0], `"key":"host:stt:1"`) {
		t.Fatalf("current values %v, want host:stt:1 only", got)
	}
}
