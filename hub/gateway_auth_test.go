package hub_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eventhub/eventhub/acl"
	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/client"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
)

func jwtHub(t *testing.T) *hub.Hub {
	return startHub(t, hub.Config{Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret, Leeway: time.Millisecond}}})
}

func dial(t *testing.T, h *hub.Hub, token string) *client.Client {
	t.Helper()
	c, err := client.Dial(t.Context(), "ws://"+h.Addr("ws"), client.Config{Token: token, NoReconnect: true})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func mintPolicy(t *testing.T, ttl time.Duration, p acl.Policy) string {
	t.Helper()
	tok, err := auth.MintHS256(secret, auth.MintClaims{Subject: "svc", Policy: &p, TTL: ttl}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestGatewayEnforcesEachConnectionsOwnPolicy(t *testing.T) {
	h := jwtHub(t)
	ctx := t.Context()
	// The seed kept one global policy: the last AUTH gave everyone its rights.
	narrow := dial(t, h, mint(t, time.Minute, "publish:heartbeat.*"))
	wide := dial(t, h, mint(t, time.Minute, "publish:**", "subscribe:**"))

	if _, err := narrow.Publish(ctx, "heartbeat.received", json.RawMessage(`{"pid":1}`), facade.PublishOptions{}); err != nil {
		t.Fatalf("allowed publish: %v", err)
	}
	_, err := narrow.Publish(ctx, "process.state", json.RawMessage(`{}`), facade.PublishOptions{})
	if !errors.Is(err, &facade.Error{Code: "forbidden"}) {
		t.Fatalf("publish outside the policy: %v, want forbidden", err)
	}
	if _, err := wide.Publish(ctx, "process.state", json.RawMessage(`{}`), facade.PublishOptions{Key: "k"}); err != nil {
		t.Fatalf("the wide token lost its rights: %v", err)
	}
	// The narrow connection still may not, after the wide one authenticated.
	if _, err := narrow.Publish(ctx, "process.state", json.RawMessage(`{}`), facade.PublishOptions{}); !errors.Is(err, &facade.Error{Code: "forbidden"}) {
		t.Fatalf("narrow connection gained rights from another connection: %v", err)
	}
	nop := func(context.Context, facade.Delivery) error { return nil }
	if _, err := narrow.Subscribe(ctx, "heartbeat.received", "g", nop, facade.SubscribeOptions{}); !errors.Is(err, &facade.Error{Code: "forbidden"}) {
		t.Fatalf("subscribe without subscribe scope: %v", err)
	}
}

func TestGatewaySubscribeGroups(t *testing.T) {
	h := jwtHub(t)
	tok := mintPolicy(t, time.Minute, acl.Policy{Rules: []acl.Rule{
		{Effect: acl.EffectDeny, Action: acl.ActionSubscribe, Topics: []string{"process.secret"}},
		{Effect: acl.EffectAllow, Action: acl.ActionSubscribe, Topics: []string{"process.**"}, Groups: []string{"dashboard"}},
	}})
	c := dial(t, h, tok)
	nop := func(context.Context, facade.Delivery) error { return nil }
	if _, err := c.Subscribe(t.Context(), "process.state", "dashboard", nop, facade.SubscribeOptions{}); err != nil {
		t.Fatalf("allowed group: %v", err)
	}
	for _, tc := range []struct{ topic, group string }{{"process.state", "other"}, {"process.secret", "dashboard"}, {"heartbeat.received", "dashboard"}} {
		if _, err := c.Subscribe(t.Context(), tc.topic, tc.group, nop, facade.SubscribeOptions{}); !errors.Is(err, &facade.Error{Code: "forbidden"}) {
			t.Fatalf("subscribe %s as %s: %v, want forbidden", tc.topic, tc.group, err)
		}
	}
}

func TestGatewayTokenRejectedAndExpiring(t *testing.T) {
	h := jwtHub(t)
	if _, err := client.Dial(t.Context(), "ws://"+h.Addr("ws"), client.Config{Token: "garbage", NoReconnect: true}); err == nil {
		t.Fatal("a garbage token was accepted")
	}
	expired, _ := auth.MintHS256(secret, auth.MintClaims{Subject: "x", Scopes: []string{"publish:a"}, TTL: time.Minute}, time.Now().Add(-2*time.Minute))
	if _, err := client.Dial(t.Context(), "ws://"+h.Addr("ws"), client.Config{Token: expired, NoReconnect: true}); err == nil {
		t.Fatal("an expired token was accepted")
	}
	c := dial(t, h, mint(t, 2*time.Second, "publish:a"))
	testutil.CheckFor(t, 15*time.Second, func() error {
		if _, err := c.Publish(t.Context(), "a", json.RawMessage(`1`), facade.PublishOptions{}); err == nil {
			return errors.New("the connection outlived its token")
		}
		return nil // told token_expired and closed
	})
}

func TestHTTPPublishAuth(t *testing.T) {
	h := jwtHub(t)
	post := func(topic, token string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+h.Addr("http")+"/publish/"+topic, strings.NewReader(`{"x":1}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tok := mint(t, time.Minute, "publish:heartbeat.*")
	if code := post("heartbeat.received", ""); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	if code := post("process.state", tok); code != http.StatusForbidden {
		t.Fatalf("outside the policy: %d", code)
	}
	if code := post("heartbeat.received", tok); code != http.StatusOK {
		t.Fatalf("allowed: %d", code)
	}
	// The ops endpoints on the HTTP port need the token too.
	if code, _ := get(t, "http://"+h.Addr("http")+"/ops/topics", ""); code != http.StatusUnauthorized {
		t.Fatalf("/ops/topics without a token: %d", code)
	}
	if code, _ := get(t, "http://"+h.Addr("http")+"/ops/topics", tok); code != http.StatusOK {
		t.Fatalf("/ops/topics with a token: %d", code)
	}
	// Reading a topic needs the right to subscribe to it.
	reader := mint(t, time.Minute, "subscribe:heartbeat.*")
	if code, _ := get(t, "http://"+h.Addr("http")+"/ops/replay?topic=heartbeat.received", reader); code != http.StatusOK {
		t.Fatalf("replay of an allowed topic: %d", code)
	}
	for _, path := range []string{"/ops/replay?topic=process.state", "/ops/latest-by-key?topic=process.state&key=k", "/ops/replay?topic=heartbeat.received"} {
		tk := reader
		if strings.HasSuffix(path, "heartbeat.received") {
			tk = tok // publish-only token
		}
		if code, _ := get(t, "http://"+h.Addr("http")+path, tk); code != http.StatusForbidden {
			t.Fatalf("%s without subscribe rights: %d, want 403", path, code)
		}
	}
}

func TestDemoFillsProcessState(t *testing.T) {
	h := startHub(t, hub.Config{Projector: hub.ProjectorConfig{Demo: true}})
	testutil.CheckFor(t, 20*time.Second, func() error {
		n := 0
		_, err := h.Bus.Latest(t.Context(), "process.state", func(e *facade.EventRecord) error {
			if strings.Contains(string(e.Payload), `"status":"alive"`) {
				n++
			}
			return nil
		})
		if err == nil && n == 0 {
			err = errors.New("no alive process in process.state after the demo ran")
		}
		return err
	})
}

// TestDemoTopicsRetention: -demo keeps its heartbeats three days and
// process.state compacted, through the topics' settings, which a
// configuration file's topics entry overrides.
func TestDemoTopicsRetention(t *testing.T) {
	check := func(t *testing.T, h *hub.Hub, heartbeatAge time.Duration) {
		t.Helper()
		hb, err := h.Bus.Admin().DescribeStream(t.Context(), "heartbeat.received")
		if err != nil {
			t.Fatal(err)
		}
		if hb.MaxAge != heartbeatAge || hb.Compaction {
			t.Errorf("heartbeat.received: max age %v, compaction %v; want %v, no compaction", hb.MaxAge, hb.Compaction, heartbeatAge)
		}
		ps, err := h.Bus.Admin().DescribeStream(t.Context(), "process.state")
		if err != nil {
			t.Fatal(err)
		}
		if !ps.Compaction || ps.MaxAge != 0 {
			t.Errorf("process.state: compaction %v, max age %v; want compacted, kept", ps.Compaction, ps.MaxAge)
		}
	}
	t.Run("demo", func(t *testing.T) {
		check(t, startHub(t, hub.Config{Projector: hub.ProjectorConfig{Demo: true}}), 72*time.Hour)
	})
	t.Run("configured", func(t *testing.T) {
		h := startHub(t, hub.Config{Projector: hub.ProjectorConfig{Demo: true}, Bus: jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "heartbeat.*", MaxAge: time.Hour}}}})
		check(t, h, time.Hour)
	})
}

// TestGatewayWildcardSubscriptionRights: a group subscription to a pattern
// needs the subscribe right on every topic the pattern matches.
func TestGatewayWildcardSubscriptionRights(t *testing.T) {
	h := startHub(t, hub.Config{
		Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret, Leeway: time.Millisecond}},
		Bus:  jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "orders.**", Stream: "ORDERS"}}},
	})
	ctx := t.Context()
	nop := func(context.Context, facade.Delivery) error { return nil }

	wide := dial(t, h, mint(t, time.Minute, "subscribe:orders.**", "publish:orders.**"))
	got := make(chan *facade.EventRecord, 4)
	if _, err := wide.Subscribe(ctx, "orders.*", "g", func(_ context.Context, d facade.Delivery) error {
		got <- d.Event()
		return nil
	}, facade.SubscribeOptions{}); err != nil {
		t.Fatalf("orders.* under subscribe:orders.**: %v", err)
	}
	if _, err := wide.Publish(ctx, "orders.a", json.RawMessage(`1`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-got:
		if e.Topic != "orders.a" {
			t.Fatalf("delivered topic %s", e.Topic)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no delivery to the wildcard group")
	}
	if _, err := wide.Publish(ctx, "orders.*", json.RawMessage(`1`), facade.PublishOptions{}); !errors.Is(err, facade.ErrBadTopic) {
		t.Fatalf("publish to a pattern: %v, want bad_topic", err)
	}

	for _, tc := range []struct {
		name    string
		token   string
		pattern string
	}{
		{"a rule on one topic", mint(t, time.Minute, "subscribe:orders.a"), "orders.*"},
		{"* does not cover **", mint(t, time.Minute, "subscribe:orders.*"), "orders.**"},
		{"a deny inside the pattern", mintPolicy(t, time.Minute, acl.Policy{Rules: []acl.Rule{
			{Effect: acl.EffectDeny, Action: acl.ActionSubscribe, Topics: []string{"orders.secret"}},
			{Effect: acl.EffectAllow, Action: acl.ActionSubscribe, Topics: []string{"orders.**"}},
		}}), "orders.*"},
		{"another group", mintPolicy(t, time.Minute, acl.Policy{Rules: []acl.Rule{
			{Effect: acl.EffectAllow, Action: acl.ActionSubscribe, Topics: []string{"orders.**"}, Groups: []string{"billing"}},
		}}), "orders.*"},
	} {
		c := dial(t, h, tc.token)
		if _, err := c.Subscribe(ctx, tc.pattern, "g", nop, facade.SubscribeOptions{}); !errors.Is(err, facade.ErrForbidden) {
			t.Errorf("%s: subscribe %s: %v, want forbidden", tc.name, tc.pattern, err)
		}
	}
	// A group-restricted rule admits its group on the pattern.
	billing := dial(t, h, mintPolicy(t, time.Minute, acl.Policy{Rules: []acl.Rule{
		{Effect: acl.EffectAllow, Action: acl.ActionSubscribe, Topics: []string{"orders.**"}, Groups: []string{"billing"}},
	}}))
	if _, err := billing.Subscribe(ctx, "orders.**", "billing", nop, facade.SubscribeOptions{}); err != nil {
		t.Fatalf("billing on orders.**: %v", err)
	}
}
