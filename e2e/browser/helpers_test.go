package browser_test

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/gateway"
	"github.com/eventhub/eventhub/inspect"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/ops"
	"github.com/eventhub/eventhub/web"
)

func TestMain(m *testing.M) {
	os.Exit(testutil.RunCheckingLeaks(m, 10*time.Second, "eventhub/gateway.", "eventhub/jetstream.", "eventhub/ops.", "eventhub/web", "chromedp/chromedp."))
}

// waitTimeout bounds every wait for the browser or the bus: generous, for a
// busy 2-core machine running the tests with -race.
const waitTimeout = 45 * time.Second

// stack is the hub's HTTP side on one origin: the gateway at /ws and
// /publish/, the ops endpoints under /ops/, the site at /.
type stack struct {
	bus   *jetstream.Bus
	srv   *httptest.Server
	site  *web.Site
	token string
	gwCfg gateway.Config
	gw    atomic.Pointer[gateway.Gateway]
	// blocked: the gateway's routes answer 503, so that clients stay
	// disconnected while the test publishes (see dropSessions).
	blocked atomic.Bool
}

// newStack starts an embedded NATS bus (process.state compacted), a
// gateway with the static token (none: no authentication), the ops
// endpoints (bearer token) and the site, behind one httptest.Server.
func newStack(t testing.TB, token string) *stack {
	t.Helper()
	bus, err := jetstream.Open(context.Background(), jetstream.OpenConfig{
		Server: jetstream.ServerConfig{DataDir: t.TempDir(), Port: -1},
		Bus: jetstream.Config{
			Topics: []jetstream.TopicConfig{{Pattern: "process.state", Compaction: true}},
		},
	})
	if err != nil {
		t.Fatalf("open bus: %v", err)
	}
	t.Cleanup(func() { bus.Close() })

	st := &stack{bus: bus, token: token, gwCfg: gateway.Config{Token: token}}
	opsCfg := ops.Config{Bus: bus.Admin()}
	if token != "" {
		opsCfg.Authorize = func(r *http.Request) error {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
				return errors.New("bad or missing bearer token")
			}
			return nil
		}
	}
	opsCfg.Sessions = sessionsOf{st}
	if token != "" {
		opsCfg.AuthorizeAdmin = func(r *http.Request) (string, error) {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
				return "", errors.New("bad or missing bearer token")
			}
			return "static-token", nil
		}
	}
	opsH, err := ops.New(opsCfg)
	if err != nil {
		t.Fatalf("ops: %v", err)
	}
	g := st.newGateway(t)
	st.gw.Store(g)
	site, err := web.New(web.Config{OpsBase: "/ops", WebSocket: st.gatewayHandler()})
	if err != nil {
		t.Fatalf("web: %v", err)
	}
	st.site = site

	mux := http.NewServeMux()
	mux.Handle("GET /ws", st.gatewayHandler())
	mux.Handle("POST /publish/{topic}", st.gatewayHandler())
	mux.Handle("/ops/", http.StripPrefix("/ops", opsH))
	mux.Handle("/", site)
	// Test-only routes: an empty page under the site's policy, to run
	// scripts that import /client.js, and a scripted WebSocket peer.
	mux.HandleFunc("GET /blank", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", site.ContentSecurityPolicy())
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<!doctype html><html lang=en><title>blank</title><link rel=icon href=/favicon.svg><p>blank</p></html>")
	})
	fake := &fakePeer{conns: make(map[*websocket.Conn]struct{})}
	mux.Handle("GET /fake-ws", fake)
	st.srv = httptest.NewServer(mux)
	t.Cleanup(st.srv.Close)
	t.Cleanup(fake.close)
	// Registered last, so run first: sessions end before the server closes.
	t.Cleanup(func() {
		if err := st.gw.Load().Close(); err != nil {
			t.Errorf("gateway close: %v", err)
		}
	})
	return st
}

func (st *stack) newGateway(t testing.TB) *gateway.Gateway {
	t.Helper()
	g, err := gateway.New(st.bus, st.gwCfg)
	if err != nil {
		t.Fatalf("gateway: %v", err)
	}
	return g
}

// sessionsOf lists the sessions of the stack's current gateway.
type sessionsOf struct{ st *stack }

func (s sessionsOf) Sessions() []inspect.SessionInfo { return s.st.gw.Load().Sessions() }
func (s sessionsOf) Disconnect(id uint64) bool       { return s.st.gw.Load().Disconnect(id) }

// gatewayHandler routes to the current gateway (see restartGateway).
func (st *stack) gatewayHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if st.blocked.Load() {
			http.Error(w, "gateway blocked by the test", http.StatusServiceUnavailable)
			return
		}
		st.gw.Load().Handler().ServeHTTP(w, r)
	})
}

// dropSessions keeps clients out of the gateway and closes every session
// it has (close code 4004, as an operator's Disconnect): clients go on
// trying to reconnect until the test calls the returned function.
func (st *stack) dropSessions(t testing.TB) (unblock func()) {
	t.Helper()
	st.blocked.Store(true)
	for _, s := range st.gw.Load().Sessions() {
		st.gw.Load().Disconnect(s.ID)
	}
	return func() { st.blocked.Store(false) }
}

// groupsOf returns the consumers of topic's stream that are consumer
// groups (with acknowledgements), by name; live subscriptions read with
// ordered consumers, which have none.
func (st *stack) groupsOf(t testing.TB, topic string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	ti, err := st.bus.LookupTopic(ctx, topic)
	if err != nil {
		t.Fatalf("lookup %s: %v", topic, err)
	}
	var out []string
	l := ti.Stream.ListConsumers(ctx)
	for ci := range l.Info() {
		if ci.Config.AckPolicy != njs.AckNonePolicy || ci.Config.Durable != "" {
			out = append(out, ci.Name)
		}
	}
	if err := l.Err(); err != nil {
		t.Fatalf("list consumers of %s: %v", topic, err)
	}
	return out
}

// restartGateway puts a new gateway in place and shuts the old one down:
// its clients are closed with 1001 (going away) and reconnect to the new one.
func (st *stack) restartGateway(t testing.TB) {
	t.Helper()
	old := st.gw.Swap(st.newGateway(t))
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	if err := old.Shutdown(ctx); err != nil {
		t.Fatalf("gateway shutdown: %v", err)
	}
}

// publishJSON publishes v from Go, straight to the bus.
func (st *stack) publishJSON(t testing.TB, topic string, v any, opts facade.PublishOptions) *facade.EventRecord {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	rec, err := st.bus.Publish(ctx, topic, b, opts)
	if err != nil {
		t.Fatalf("publish %s: %v", topic, err)
	}
	return rec
}

// chromiumPath finds Debian's Chromium: $CHROMIUM_BIN, /usr/bin/chromium, or
// chromium / chromium-browser on PATH. The tests fail without it; they never
// skip.
func chromiumPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM_BIN"); p != "" {
		return p
	}
	for _, c := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	t.Fatalf("Chromium not found (tried $CHROMIUM_BIN, /usr/bin/chromium, chromium and chromium-browser on PATH): " +
		"install it with scripts/chromium.sh (Debian package chromium)")
	return ""
}

// browser is one headless Chromium tab, with its console collected.
type browser struct {
	ctx context.Context

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

// newBrowser starts headless Chromium with a fresh profile and opens a tab.
func newBrowser(t testing.TB) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests run as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	b := &browser{ctx: ctx}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		wg.Wait()
	})
	if err := chromedp.Do(ctx); err != nil { // starts the browser and the tab
		t.Fatalf("start Chromium: %v (install it with scripts/chromium.sh)", err)
	}
	msgs := chromedp.Console(ctx)
	wg.Go(func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m)
			b.mu.Unlock()
		}
	})
	return b
}

// do runs actions with the test's deadline.
func (b *browser) do(t testing.TB, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v%s", what, err, b.consoleDump())
	}
}

// eval evaluates an expression (awaiting a promise) and decodes its value.
func eval[T any](t testing.TB, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v%s", expr, err, b.consoleDump())
	}
	return v
}

// waitJS polls a JavaScript expression in the page until it is truthy.
func (b *browser) waitJS(t testing.TB, what, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout+5*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(waitTimeout)))
	if err != nil {
		t.Fatalf("waiting for %s (%s): %v%s", what, expr, err, b.consoleDump())
	}
}

// problems returns the console messages that mean the page is broken: an
// uncaught exception, a rejected promise nobody handled, or a violation of
// the Content-Security-Policy.
func (b *browser) problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.console {
		if m.IsException() || strings.Contains(m.Text, "Content Security Policy") || strings.Contains(m.Text, "Refused to") {
			out = append(out, fmt.Sprintf("%s (%s:%d)", m.String(), m.URL, m.Line+1))
		}
	}
	return out
}

func (b *browser) consoleDump() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.console) == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString("\nbrowser console:")
	for _, m := range b.console {
		fmt.Fprintf(&sb, "\n  %s (%s:%d)", m.String(), m.URL, m.Line+1)
	}
	return sb.String()
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// fakePeer is a scripted WebSocket server for what the real gateway never
// does. The mode query parameter picks the script:
//
//   - wrongcorr: AUTH is answered by an OK with another corr and an OK
//     without corr, never by its own.
//   - puberr: PUBLISH is answered by an OK with another corr, then by ERR
//     publish_failed with its own.
//   - eventfirst: SUBSCRIBE is answered by an EVENT (attempt 3) before its OK.
//   - batch: an AUTH that asks for batches is answered by a batch, an OK
//     with another corr then its own, one that does not by ERR no_batch;
//     PUBLISH likewise by a batch, the OK of another corr then its own.
//
// Every mode answers AUTH with OK (except wrongcorr) and echoes each ACK,
// NACK and MODACK back as {"op":"ERR","code":"seen","msg":<the frame>}.
type fakePeer struct {
	mu    sync.Mutex
	conns map[*websocket.Conn]struct{}
	wg    sync.WaitGroup
}

func (f *fakePeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	f.mu.Lock()
	f.conns[c] = struct{}{}
	f.wg.Add(1)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
		c.Close()
		f.wg.Done()
	}()
	mode := r.URL.Query().Get("mode")
	send := func(v any) bool { return c.WriteJSON(v) == nil }
	for {
		_ = c.SetReadDeadline(time.Now().Add(2 * waitTimeout))
		_, data, err := c.ReadMessage()
		if err != nil {
			return
		}
		var fr struct {
			Op, Corr, Topic, Group string
			Batch                  bool
		}
		if json.Unmarshal(data, &fr) != nil {
			return
		}
		ok := true
		switch fr.Op {
		case "AUTH":
			if mode == "batch" {
				if fr.Batch {
					ok = send([]map[string]any{{"op": "OK", "corr": "not-" + fr.Corr}, {"op": "OK", "corr": fr.Corr}})
				} else {
					ok = send(map[string]any{"op": "ERR", "corr": fr.Corr, "code": "no_batch", "msg": "AUTH without batch"})
				}
			} else if mode == "wrongcorr" {
				ok = send(map[string]any{"op": "OK", "corr": "not-" + fr.Corr}) && send(map[string]any{"op": "OK"})
			} else {
				ok = send(map[string]any{"op": "OK", "corr": fr.Corr})
			}
		case "PUBLISH":
			if mode == "batch" {
				ok = send([]map[string]any{{"op": "OK", "corr": "not-" + fr.Corr, "id": "wrong-id"},
					{"op": "OK", "corr": fr.Corr, "id": "batch-id", "seq": 1, "ts": 1}})
			} else if mode == "puberr" {
				ok = send(map[string]any{"op": "OK", "corr": "not-" + fr.Corr, "id": "wrong-id"}) &&
					send(map[string]any{"op": "ERR", "corr": fr.Corr, "code": "publish_failed", "msg": "scripted failure"})
			} else {
				ok = send(map[string]any{"op": "OK", "corr": fr.Corr, "id": "fake-id", "seq": 1, "ts": 1})
			}
		case "SUBSCRIBE":
			if mode == "eventfirst" {
				ok = send(map[string]any{"op": "EVENT", "topic": fr.Topic, "group": fr.Group,
					"event": map[string]any{"id": "e-1", "ts": 1, "topic": fr.Topic, "payload": map[string]bool{"first": true}},
					"ctx":   map[string]int{"attempt": 3, "ack_deadline_ms": 5000}})
			}
			ok = ok && send(map[string]any{"op": "OK", "corr": fr.Corr})
		case "ACK", "NACK", "MODACK":
			ok = send(map[string]any{"op": "ERR", "code": "seen", "msg": string(data)})
		default:
			ok = send(map[string]any{"op": "OK", "corr": fr.Corr})
		}
		if !ok {
			return
		}
	}
}

// close ends every connection and waits for their handlers.
func (f *fakePeer) close() {
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
