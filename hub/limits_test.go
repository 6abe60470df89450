package hub_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/client"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/limits"
	"github.com/eventhub/eventhub/wire"
)

func mintSubject(t testing.TB, subject string) string {
	t.Helper()
	tok, err := auth.MintHS256(secret, auth.MintClaims{Subject: subject, Scopes: []string{"publish:**", "subscribe:**"}, TTL: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func limitedHub(t *testing.T, lc limits.Config) *hub.Hub {
	return startHub(t, hub.Config{NATS: hub.NATSConfig{Memory: true, Port: -1}, Server: hub.ServerConfig{OpsPort: -1}, Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}, Limits: lc})
}

// TestRateLimitOnEveryWayIn: one principal's bucket is drawn on by its
// WebSocket and HTTP publishes alike, and each way in says how long to wait.
func TestRateLimitOnEveryWayIn(t *testing.T) {
	h := limitedHub(t, limits.Config{Rates: []limits.RateRule{{Events: 2, EventsBurst: 2}}})
	ctx := t.Context()
	tok := mintSubject(t, "alice")
	c := dial(t, h, tok)
	if _, err := c.Publish(ctx, "rl.t", json.RawMessage(`{}`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	post := func(token string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+h.Addr("http")+"/publish/rl.t", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	if r := post(tok); r.StatusCode != http.StatusOK {
		t.Fatalf("second publish (HTTP): %s", r.Status)
	}
	// The bucket is empty: WebSocket gets ERR rate_limited with the wait.
	_, err := c.Publish(ctx, "rl.t", json.RawMessage(`{}`), facade.PublishOptions{})
	d, ok := facade.RetryAfter(err)
	if !errors.Is(err, facade.ErrRateLimited) || !ok || d <= 0 || d > time.Second {
		t.Fatalf("WebSocket over the limit: %v (retry after %v)", err, d)
	}
	// HTTP: 429 with Retry-After in seconds and the exact milliseconds.
	r := post(tok)
	body, _ := io.ReadAll(r.Body)
	ms, _ := strconv.Atoi(r.Header.Get("Eventhub-Retry-After-Ms"))
	if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "1" || ms <= 0 || ms > 1000 ||
		!strings.Contains(string(body), `"rate_limited"`) {
		t.Fatalf("HTTP over the limit: %s %v %s", r.Status, r.Header, body)
	}
	// Another principal is not affected.
	if r := post(mintSubject(t, "bob")); r.StatusCode != http.StatusOK {
		t.Fatalf("bob: %s", r.Status)
	}
	// A client that asks for it waits and retries by itself.
	patient, err := client.Dial(ctx, "ws://"+h.Addr("ws"), client.Config{Token: tok, NoReconnect: true, RateLimitWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer patient.Close()
	start := time.Now()
	for i := range 3 {
		if _, err := patient.Publish(ctx, "rl.t", json.RawMessage(`{}`), facade.PublishOptions{}); err != nil {
			t.Fatalf("patient publish %d: %v", i, err)
		}
	}
	if el := time.Since(start); el < 700*time.Millisecond {
		t.Fatalf("3 publishes at 2/s took %v: the client did not wait", el)
	}
	// The throttles are counted by class and reason, not by token.
	mf, err := h.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range mf {
		if f.GetName() != "requests_throttled_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "class" && l.GetName() != "reason" {
					t.Fatalf("label %s", l.GetName())
				}
			}
			n += m.GetCounter().GetValue()
		}
	}
	if n < 3 {
		t.Fatalf("requests_throttled_total = %v, want at least 3", n)
	}
}

func TestConnectionAndTopicQuotasThroughTheGateway(t *testing.T) {
	h := limitedHub(t, limits.Config{Quotas: limits.Quotas{Connections: 1, Topics: 1}})
	ctx := t.Context()
	tok := mintSubject(t, "alice")
	c := dial(t, h, tok)
	_, err := client.Dial(ctx, "ws://"+h.Addr("ws"), client.Config{Token: tok, NoReconnect: true})
	if !errors.Is(err, facade.ErrConnectionQuota) {
		t.Fatalf("second connection: %v, want connection_quota", err)
	}
	if _, err := c.Publish(ctx, "tq.one", json.RawMessage(`{}`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Publish(ctx, "tq.two", json.RawMessage(`{}`), facade.PublishOptions{})
	if !errors.Is(err, facade.ErrTopicQuota) {
		t.Fatalf("second topic: %v, want topic_quota", err)
	}
	// The first connection is still up, and its close frees the slot.
	if _, err := c.Publish(ctx, "tq.one", json.RawMessage(`{}`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	testutil.CheckFor(t, 10*time.Second, func() error {
		c2, err := client.Dial(ctx, "ws://"+h.Addr("ws"), client.Config{Token: tok, NoReconnect: true})
		if err != nil && !errors.Is(err, facade.ErrConnectionQuota) {
			t.Fatalf("after the first connection closed: %v", err)
		}
		if err != nil {
			return fmt.Errorf("after the first connection closed: %w", err)
		}
		_ = c2.Close()
		return nil
	})
}

// TestAccountLimitsOfTheEmbeddedServer: NATS enforces the account's
// stream limit, and the hub reports it as limit_exceeded.
func TestAccountLimitsOfTheEmbeddedServer(t *testing.T) {
	h := startHub(t, hub.Config{NATS: hub.NATSConfig{Memory: true, Port: -1}, Server: hub.ServerConfig{OpsPort: -1, WSPort: -1, HTTPPort: -1}, Limits: limits.Config{Account: limits.AccountLimits{MaxStreams: 3}}})
	var err error
	for i := 0; i < 10 && err == nil; i++ {
		_, err = h.Bus.Publish(t.Context(), fmt.Sprintf("acct.t%d", i), []byte(`{}`), facade.PublishOptions{})
	}
	if !errors.Is(err, facade.ErrLimitExceeded) {
		t.Fatalf("past the account's streams: %v, want limit_exceeded", err)
	}
}

// TestLimitsExampleConfigLoads keeps deploy/hub/limits.example.yaml in step
// with the configuration's keys (unknown keys are errors), and starts a hub
// with it, its data on disk: its account limits fit an ordinary disk.
func TestLimitsExampleConfigLoads(t *testing.T) {
	fc, err := hub.LoadFile("../deploy/hub/limits.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l := fc.Limits
	if len(l.Rates) != 3 || l.Quotas.Topics != 50 || len(l.Principals) != 1 || l.Account.MaxStreams != 1000 || l.ConnectionsPerIP != 200 {
		t.Fatalf("loaded %+v", l)
	}
	cfg := fc
	cfg.NATS.DataDir, cfg.NATS.Port, cfg.Server.OpsPort, cfg.Server.WSPort, cfg.Server.HTTPPort = t.TempDir(), -1, -1, 0, -1
	h := startHub(t, cfg)
	if _, err := h.Bus.Publish(t.Context(), "example.t", []byte(`{}`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestAccountStorageBeyondTheDisk: account storage beyond what JetStream
// has on the server stops the hub with an error that names the setting and
// the space there is.
func TestAccountStorageBeyondTheDisk(t *testing.T) {
	_, err := hub.Start(t.Context(), hub.Config{NATS: hub.NATSConfig{DataDir: t.TempDir(), Port: -1}, Server: hub.ServerConfig{OpsPort: -1, WSPort: -1, HTTPPort: -1}, Limits: limits.Config{Account: limits.AccountLimits{MaxStorageBytes: 1 << 60}}})
	if err == nil || !strings.Contains(err.Error(), "limits.account.maxStorageBytes is 1.0 EiB") ||
		!regexp.MustCompile(`the [0-9.]+ [KMGTPE]iB \([0-9]+ bytes\) that were free on the disk of `).MatchString(err.Error()) {
		t.Fatalf("account storage of 1 EiB: %v, want an error naming limits.account.maxStorageBytes and the free space", err)
	}
}

// TestSSECountsAsAConnection: an event stream is held against the same
// connection quota as a WebSocket connection: with a quota of one, a
// principal with a WebSocket connection open gets connection_quota (429)
// on GET /sse, and gets the stream once the WebSocket is closed.
func TestSSECountsAsAConnection(t *testing.T) {
	h := limitedHub(t, limits.Config{Quotas: limits.Quotas{Connections: 1}})
	tok := mintSubject(t, "bob")
	c := dial(t, h, tok)
	sse := func() int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+h.Addr("ws")+"/sse/sq.one", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := sse(); s != http.StatusTooManyRequests {
		t.Fatalf("an event stream beside a WebSocket connection with a quota of one: %d, want 429", s)
	}
	_ = c.Close()
	testutil.CheckFor(t, 10*time.Second, func() error {
		if s := sse(); s != http.StatusOK {
			return fmt.Errorf("after the WebSocket closed: %d", s)
		}
		return nil
	})
}

// TestReauthAtTheConnectionQuota: a connection whose principal holds its
// whole connection quota (1) refreshes its token with a new AUTH: it stays
// open, and still counts as the one connection.
func TestReauthAtTheConnectionQuota(t *testing.T) {
	h := limitedHub(t, limits.Config{Quotas: limits.Quotas{Connections: 1}})
	ws, _, err := (&websocket.Dialer{HandshakeTimeout: 5 * time.Second}).Dial("ws://"+h.Addr("ws"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	auth := func(corr string) wire.Frame {
		t.Helper()
		if err := ws.WriteJSON(wire.Frame{Op: wire.OpAuth, Token: mintSubject(t, "carol"), Corr: corr}); err != nil {
			t.Fatal(err)
		}
		_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		var f wire.Frame
		if err := ws.ReadJSON(&f); err != nil {
			t.Fatalf("AUTH %s: %v", corr, err)
		}
		return f
	}
	if f := auth("1"); f.Op != wire.OpOK {
		t.Fatalf("first AUTH: %+v", f)
	}
	if f := auth("2"); f.Op != wire.OpOK {
		t.Fatalf("a token refresh at the connection quota: %+v", f)
	}
	if _, err := client.Dial(t.Context(), "ws://"+h.Addr("ws"), client.Config{Token: mintSubject(t, "carol"), NoReconnect: true}); !errors.Is(err, facade.ErrConnectionQuota) {
		t.Fatalf("a second connection after the refresh: %v, want connection_quota", err)
	}
}

// TestReauthAsAnotherSubjectMovesTheSubscriptions: a connection that
// re-authenticates as another subject counts its subscriptions against the
// new principal's quota (2 here), no longer against the previous one's:
// what does not fit the new quota ends with ERR subscription_quota naming
// it, and the previous principal has its whole quota again.
func TestReauthAsAnotherSubjectMovesTheSubscriptions(t *testing.T) {
	h := limitedHub(t, limits.Config{Quotas: limits.Quotas{Subscriptions: 2}})
	ctx := t.Context()
	nop := func(context.Context, facade.Delivery) error { return nil }
	// bob holds one subscription on a connection of its own.
	if _, err := dial(t, h, mintSubject(t, "bob")).Subscribe(ctx, "ra.x", "g", nop, facade.SubscribeOptions{}); err != nil {
		t.Fatal(err)
	}
	ws, _, err := (&websocket.Dialer{HandshakeTimeout: 5 * time.Second}).Dial("ws://"+h.Addr("ws"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	// call sends f and reads up to its answer, returning the unsolicited
	// ERR frames read before it.
	call := func(f wire.Frame) (wire.Frame, []wire.Frame) {
		t.Helper()
		if err := ws.WriteJSON(f); err != nil {
			t.Fatal(err)
		}
		var errs []wire.Frame
		for {
			_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
			var r wire.Frame
			if err := ws.ReadJSON(&r); err != nil {
				t.Fatalf("%s %s: %v", f.Op, f.Corr, err)
			}
			switch {
			case r.Corr == f.Corr:
				return r, errs
			case r.Op == wire.OpErr:
				errs = append(errs, r)
			}
		}
	}
	// alice holds her whole quota on it: a group and a live subscription.
	for _, f := range []wire.Frame{
		{Op: wire.OpAuth, Token: mintSubject(t, "alice"), Corr: "1"},
		{Op: wire.OpSubscribe, Topic: "ra.a", Group: "g", Corr: "2"},
		{Op: wire.OpSubscribe, Topic: "ra.b", Corr: "3"},
	} {
		if r, _ := call(f); r.Op != wire.OpOK {
			t.Fatalf("%s %s: %+v", f.Op, f.Corr, r)
		}
	}
	subscribe := func(subject, topic string) error {
		c, err := client.Dial(ctx, "ws://"+h.Addr("ws"), client.Config{Token: mintSubject(t, subject), NoReconnect: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_, err = c.Subscribe(ctx, topic, "g", nop, facade.SubscribeOptions{})
		return err
	}
	if err := subscribe("alice", "ra.c"); !errors.Is(err, facade.ErrSubscriptionQuota) {
		t.Fatalf("alice's third subscription: %v, want subscription_quota", err)
	}

	// The connection becomes bob's: bob has room for one of its two.
	r, errs := call(wire.Frame{Op: wire.OpAuth, Token: mintSubject(t, "bob"), Corr: "4"})
	if r.Op != wire.OpOK {
		t.Fatalf("re-AUTH as bob: %+v", r)
	}
	if len(errs) != 1 || errs[0].Code != wire.CodeSubQuota || (errs[0].Topic != "ra.a" && errs[0].Topic != "ra.b") {
		t.Fatalf("re-AUTH as bob ended %+v, want one subscription ended with subscription_quota", errs)
	}
	// A token refresh as bob, at his quota, keeps what he holds.
	if r, errs := call(wire.Frame{Op: wire.OpAuth, Token: mintSubject(t, "bob"), Corr: "5"}); r.Op != wire.OpOK || len(errs) != 0 {
		t.Fatalf("refresh as bob: %+v, ended %+v", r, errs)
	}
	// bob holds two (the quota): a third is refused.
	if err := subscribe("bob", "ra.d"); !errors.Is(err, facade.ErrSubscriptionQuota) {
		t.Fatalf("bob's third subscription: %v, want subscription_quota", err)
	}
	// alice holds none: her whole quota is hers again.
	for _, topic := range []string{"ra.e", "ra.f"} {
		if err := subscribe("alice", topic); err != nil {
			t.Fatalf("alice after the connection became bob's: %v", err)
		}
	}
}
