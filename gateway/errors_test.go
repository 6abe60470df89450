package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/wire"
)

// faultBus injects failures for topics named fault.*.
type faultBus struct{ *jetstream.Bus }

func fault(topic string) error {
	switch topic {
	case "fault.publish":
		return errors.New("disk on fire")
	case "fault.unavailable":
		return fmt.Errorf("cursor: %w", context.DeadlineExceeded)
	case "fault.closed":
		return facade.ErrClosed
	case "fault.internal":
		return errors.New("unexpected")
	case "fault.panic":
		panic("boom")
	}
	return nil
}

func (b faultBus) Publish(ctx context.Context, topic string, p json.RawMessage, o facade.PublishOptions) (*facade.EventRecord, error) {
	if err := fault(topic); err != nil {
		return nil, err
	}
	return b.Bus.Publish(ctx, topic, p, o)
}

func (b faultBus) PublishAsync(ctx context.Context, topic string, p json.RawMessage, o facade.PublishOptions) (facade.PublishFuture, error) {
	if err := fault(topic); err != nil {
		return nil, err
	}
	return b.Bus.PublishAsync(ctx, topic, p, o)
}

func (b faultBus) GetCursor(ctx context.Context, topic, group string) (*facade.CursorPosition, error) {
	if err := fault(topic); err != nil {
		return nil, err
	}
	return b.Bus.GetCursor(ctx, topic, group)
}

// testPrincipal allows topics by prefix.
type testPrincipal struct {
	pub, sub []string
	groups   []string // allowed groups; empty: any
	exp      time.Time
}

func (p testPrincipal) Allow(action, topic, group string) bool {
	list := p.pub
	if action == ActionSubscribe {
		list = p.sub
		if len(p.groups) > 0 && !contains(p.groups, group) {
			return false
		}
	}
	for _, pre := range list {
		if strings.HasPrefix(topic, pre) {
			return true
		}
	}
	return false
}

func (p testPrincipal) ExpiresAt() time.Time { return p.exp }

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// testAuth knows the tokens admin, limited, short (expires in 500ms).
// plainBus hides the optional capabilities (LiveReader, AsyncPublisher).
type plainBus struct{ facade.Bus }

var testAuth = AuthenticatorFunc(func(_ context.Context, token string) (Principal, error) {
	switch token {
	case "admin":
		return testPrincipal{pub: []string{""}, sub: []string{""}}, nil
	case "limited":
		return testPrincipal{pub: []string{"ok."}, sub: []string{"ok."}, groups: []string{"mine"}}, nil
	case "short":
		return testPrincipal{pub: []string{""}, sub: []string{""}, exp: time.Now().Add(500 * time.Millisecond)}, nil
	case "stale":
		return testPrincipal{pub: []string{""}, sub: []string{""}, exp: time.Now().Add(-time.Second)}, nil
	}
	return nil, errors.New("unknown token")
})

// Every code of the table is produced by at least one case, over a real
// connection unless noted.
func TestErrorCodes(t *testing.T) {
	bus := newBus(t, func(oc *jetstream.OpenConfig) {
		oc.Server.MaxPayload = 256 << 10
		oc.Bus.Topics = []jetstream.TopicConfig{{Pattern: "compact.*", Compaction: true}}
	})
	fb := faultBus{bus}
	std := newGateway(t, fb, Config{Authenticator: testAuth})
	plain := newGateway(t, plainBus{bus}, Config{Authenticator: testAuth})
	small := newGateway(t, fb, Config{Authenticator: testAuth, MaxFrameBytes: 4096})
	quick := newGateway(t, fb, Config{Authenticator: testAuth, AuthTimeout: 300 * time.Millisecond, PingInterval: 100 * time.Millisecond, IdleTimeout: 400 * time.Millisecond})
	publish(t, bus, "nf.t", `1`)

	// rawErr sends a raw frame and expects ERR code echoing corr "k" (or no
	// corr when noCorr), then checks the connection still answers.
	rawErr := func(t *testing.T, c *wsClient, raw, code string, noCorr bool) {
		t.Helper()
		c.sendRaw(raw)
		f, ok := c.await(5*time.Second, func(f wire.Frame) bool { return f.Op == wire.OpErr })
		if !ok {
			t.Fatalf("no ERR for %.80s", raw)
		}
		wantCorr := "k"
		if noCorr {
			wantCorr = ""
		}
		if f.Code != code || f.Corr != wantCorr || f.Msg == "" {
			t.Fatalf("%.80s: got ERR %s corr %q (%s), want %s corr %q", raw, f.Code, f.Corr, f.Msg, code, wantCorr)
		}
		// Messages speak the hub's words: no NATS internals, and the code
		// is not repeated inside them.
		if strings.Contains(f.Msg, "nats:") || strings.Contains(f.Msg, "err_code") || strings.Contains(f.Msg, code+":") {
			t.Fatalf("%.80s: message %q", raw, f.Msg)
		}
	}
	stillOpen := func(t *testing.T, c *wsClient) {
		t.Helper()
		r := c.request(wire.Frame{Op: wire.OpAuth, Token: "admin"})
		if r.Op != wire.OpOK {
			t.Fatalf("connection unusable after error: %+v", r)
		}
	}
	closesWith := func(t *testing.T, c *wsClient, code string, closeCode int) {
		t.Helper()
		f, ok := c.await(5*time.Second, func(f wire.Frame) bool { return f.Op == wire.OpErr })
		if !ok || f.Code != code {
			t.Fatalf("got %+v, want ERR %s", f, code)
		}
		if got := c.waitClose(5 * time.Second); got != closeCode {
			t.Fatalf("close code %d, want %d", got, closeCode)
		}
	}
	admin := func(t *testing.T, g *testGateway) *wsClient { return dialAuth(t, g.url, "admin") }

	cases := []struct {
		code string
		name string
		run  func(t *testing.T)
	}{
		{wire.CodeBadJSON, "truncated", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k"`, wire.CodeBadJSON, true)
			rawErr(t, c, `{"op":"AUTH"} {}`, wire.CodeBadJSON, true)
			stillOpen(t, c)
		}},
		{wire.CodeBadFrame, "shapes", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `[1,2]`, wire.CodeBadFrame, true)
			rawErr(t, c, `{"corr":"k"}`, wire.CodeBadFrame, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":5,"group":"g"}`, wire.CodeBadFrame, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"a.b","group":"g","opts":{"batchSize":"x"}}`, wire.CodeBadFrame, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"a.b","group":"g","opts":{"retry":{"backoffMs":"x"}}}`, wire.CodeBadFrame, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"a.b","group":"g","opts":{"retry":{"MinBackoffMs":5}}}`, wire.CodeBadFrame, false)
			if err := c.c.WriteMessage(websocket.BinaryMessage, []byte(`{"op":"AUTH"}`)); err != nil {
				t.Fatal(err)
			}
			if f, ok := c.await(5*time.Second, func(f wire.Frame) bool { return f.Op == wire.OpErr }); !ok || f.Code != wire.CodeBadFrame {
				t.Fatalf("binary frame: %+v", f)
			}
			stillOpen(t, c)
		}},
		{wire.CodeUnknownOp, "ops", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"FOO","corr":"k"}`, wire.CodeUnknownOp, false)
			rawErr(t, c, `{"op":"EVENT","corr":"k"}`, wire.CodeUnknownOp, false)
			rawErr(t, c, `{"op":"auth","corr":"k"}`, wire.CodeUnknownOp, false)
			stillOpen(t, c)
		}},
		{wire.CodeFrameTooLarge, "frames", func(t *testing.T) {
			c := admin(t, small)
			rawErr(t, c, `{"op":"PUBLISH","topic":"a.b","payload":"`+strings.Repeat("x", 5000)+`"}`, wire.CodeFrameTooLarge, true)
			stillOpen(t, c)
			// Over four times the limit: the connection is closed (1009).
			c.sendRaw(`{"op":"PUBLISH","topic":"a.b","payload":"` + strings.Repeat("x", 20000) + `"}`)
			if got := c.waitClose(5 * time.Second); got != wire.CloseMessageTooBig {
				t.Fatalf("close %d, want 1009", got)
			}
		}},
		{wire.CodeUnauthorized, "before auth", func(t *testing.T) {
			c := dial(t, std.url)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"a.b","payload":1}`, wire.CodeUnauthorized, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"a.b","group":"g"}`, wire.CodeUnauthorized, false)
			stillOpen(t, c)
		}},
		{wire.CodeBadToken, "wrong token", func(t *testing.T) {
			c := dial(t, std.url)
			c.send(wire.Frame{Op: wire.OpAuth, Token: "nope"})
			closesWith(t, c, wire.CodeBadToken, wire.CloseBadToken)
		}},
		{wire.CodeBadToken, "expired token", func(t *testing.T) {
			c := dial(t, std.url)
			c.send(wire.Frame{Op: wire.OpAuth, Token: "stale"})
			closesWith(t, c, wire.CodeBadToken, wire.CloseBadToken)
		}},
		{wire.CodeTokenExpired, "expires during session", func(t *testing.T) {
			c := dialAuth(t, std.url, "short")
			closesWith(t, c, wire.CodeTokenExpired, wire.CloseTokenExpired)
		}},
		{wire.CodeAuthTimeout, "no auth", func(t *testing.T) {
			c := dial(t, quick.url)
			closesWith(t, c, wire.CodeAuthTimeout, wire.CloseAuthTimeout)
		}},
		{wire.CodeForbidden, "acl", func(t *testing.T) {
			c := dialAuth(t, std.url, "limited")
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"no.t","payload":1}`, wire.CodeForbidden, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"no.t","group":"mine"}`, wire.CodeForbidden, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"ok.t","group":"theirs"}`, wire.CodeForbidden, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"ok.t","group":"mine","opts":{"topics":["no.t"]}}`, wire.CodeForbidden, false)
			rawErr(t, c, `{"op":"CURSOR","corr":"k","topic":"no.t","group":"mine"}`, wire.CodeForbidden, false)
			rawErr(t, c, `{"op":"SEEK","corr":"k","topic":"no.t","group":"mine","cursor":{}}`, wire.CodeForbidden, false)
			c.ok(wire.Frame{Op: wire.OpPublish, Topic: "ok.t", Payload: json.RawMessage(`1`)})
		}},
		{wire.CodeBadRequest, "fields", func(t *testing.T) {
			c := admin(t, std)
			c.ok(subscribeFrame("br.t", "g", ""))
			rawErr(t, c, `{"op":"ACK","corr":"k","topic":"br.t","group":"g"}`, wire.CodeBadRequest, false)
			rawErr(t, c, `{"op":"MODACK","corr":"k","topic":"br.t","group":"g","id":"x","extend_ms":-1}`, wire.CodeBadRequest, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"br.u","group":"g","opts":{"maxAttempts":5000}}`, wire.CodeBadRequest, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"br.u","group":"g","opts":{"from":"sometime"}}`, wire.CodeBadRequest, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"br.u","group":"g","opts":{"retry":{"minBackoffMs":2000,"maxBackoffMs":1000}}}`, wire.CodeBadRequest, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"br.u","group":"g","opts":{"retry":{"backoffMs":[100,0]}}}`, wire.CodeBadRequest, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"br.u","group":"g","opts":{"retry":{"backoffMs":[100],"maxBackoffMs":100}}}`, wire.CodeBadRequest, false)
			rawErr(t, c, `{"op":"SEEK","corr":"k","topic":"br.t","group":"g"}`, wire.CodeBadRequest, false)
		}},
		{wire.CodeBadTopic, "topics", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"a b","group":"g"}`, wire.CodeBadTopic, false)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","payload":1}`, wire.CodeBadTopic, false)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"a.>","payload":1}`, wire.CodeBadTopic, false)
		}},
		{wire.CodeBadGroup, "groups", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"a.b","group":"a b"}`, wire.CodeBadGroup, false)
			rawErr(t, c, `{"op":"CURSOR","corr":"k","topic":"a.b","group":"a b"}`, wire.CodeBadGroup, false)
		}},
		{wire.CodeBadPayload, "payloads", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"a.b"}`, wire.CodeBadPayload, false)
		}},
		{wire.CodeBadKey, "key", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"a.b","payload":1,"opts":{"key":"`+strings.Repeat("k", 2000)+`"}}`, wire.CodeBadKey, false)
		}},
		{wire.CodeBadID, "id", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"a.b","payload":1,"opts":{"id":"has space"}}`, wire.CodeBadID, false)
		}},
		{wire.CodeKeyRequired, "compacted", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"compact.state","payload":1}`, wire.CodeKeyRequired, false)
			c.ok(wire.Frame{Op: wire.OpPublish, Topic: "compact.state", Payload: json.RawMessage(`1`), Opts: json.RawMessage(`{"key":"host:a:1"}`)})
		}},
		{wire.CodeConflictingOption, "retry", func(t *testing.T) {
			// The first subscription of the group on this gateway creates
			// it with its retry policy; later ones (other connections,
			// sharing the gateway's member) must ask for the same or none.
			// The frames of docs/protocol.md.
			c := admin(t, std)
			c.ok(subscribeFrame("orders.created", "billing", `{"retry":{"backoffMs":[1000,5000,30000]}}`))
			c2 := admin(t, std)
			rawErr(t, c2, `{"op":"SUBSCRIBE","corr":"k","topic":"orders.created","group":"billing","opts":{"retry":{"minBackoffMs":50}}}`, wire.CodeConflictingOption, false)
			c2.ok(subscribeFrame("orders.created", "billing", `{"retry":{"backoffMs":[1000,5000,30000]}}`))
			admin(t, std).ok(subscribeFrame("orders.created", "billing", ""))
		}},
		{wire.CodeWrongLastSeq, "compare-and-set", func(t *testing.T) {
			c := admin(t, std)
			c.ok(wire.Frame{Op: wire.OpPublish, Topic: "kv.cas", Payload: json.RawMessage(`1`), Opts: json.RawMessage(`{"key":"k","expected_last_seq":0}`)})
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"kv.cas","payload":2,"opts":{"key":"k","expected_last_seq":0}}`, wire.CodeWrongLastSeq, false)
			rawErr(t, c, `{"op":"DELETE","corr":"k","topic":"kv.cas","key":"k","opts":{"expected_last_seq":0}}`, wire.CodeWrongLastSeq, false)
		}},
		{wire.CodeTooLarge, "store max payload", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"a.b","payload":"`+strings.Repeat("x", 300<<10)+`"}`, wire.CodeTooLarge, false)
			stillOpen(t, c)
		}},
		{wire.CodeAlreadySubscribed, "twice", func(t *testing.T) {
			c := admin(t, std)
			c.ok(subscribeFrame("as.t", "g", ""))
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"as.t","group":"g"}`, wire.CodeAlreadySubscribed, false)
		}},
		{wire.CodeNotSubscribed, "no sub", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"ACK","corr":"k","topic":"ns.t","group":"g","id":"x"}`, wire.CodeNotSubscribed, false)
			rawErr(t, c, `{"op":"UNSUBSCRIBE","corr":"k","topic":"ns.t","group":"g"}`, wire.CodeNotSubscribed, false)
		}},
		{wire.CodeUnknownID, "never delivered", func(t *testing.T) {
			c := admin(t, std)
			c.ok(subscribeFrame("ui.t", "g", ""))
			rawErr(t, c, `{"op":"ACK","corr":"k","topic":"ui.t","group":"g","id":"0190f0e0-0000-7000-8000-000000000000"}`, wire.CodeUnknownID, false)
			rawErr(t, c, `{"op":"MODACK","corr":"k","topic":"ui.t","group":"g","id":"x","extend_ms":5000}`, wire.CodeUnknownID, false)
			// An ACK without corr is still answered when it fails.
			rawErr(t, c, `{"op":"NACK","topic":"ui.t","group":"g","id":"x"}`, wire.CodeUnknownID, true)
		}},
		{wire.CodeNotFound, "no group", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"CURSOR","corr":"k","topic":"nf.t","group":"nobody"}`, wire.CodeNotFound, false)
			rawErr(t, c, `{"op":"CURSOR","corr":"k","topic":"never.created","group":"nobody"}`, wire.CodeNotFound, false)
		}},
		{wire.CodeUnsupported, "no live reader", func(t *testing.T) {
			c := admin(t, plain)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"un.t"}`, wire.CodeUnsupported, false)
		}},
		{wire.CodePublishFailed, "store error", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"fault.publish","payload":1}`, wire.CodePublishFailed, false)
		}},
		{wire.CodeUnavailable, "timeout", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"CURSOR","corr":"k","topic":"fault.unavailable","group":"g"}`, wire.CodeUnavailable, false)
		}},
		{wire.CodeClosed, "bus closed", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"CURSOR","corr":"k","topic":"fault.closed","group":"g"}`, wire.CodeClosed, false)
		}},
		{wire.CodeInternal, "unexpected", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"CURSOR","corr":"k","topic":"fault.internal","group":"g"}`, wire.CodeInternal, false)
			stillOpen(t, c)
		}},
		{wire.CodeServerError, "panic", func(t *testing.T) {
			c := admin(t, std)
			c.sendRaw(`{"op":"CURSOR","corr":"k","topic":"fault.panic","group":"g"}`)
			closesWith(t, c, wire.CodeServerError, wire.CloseServerError)
		}},
		{wire.CodeIdle, "no pong", func(t *testing.T) {
			conn, _, err := dialRaw(t, quick.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := conn.WriteMessage(websocket.TextMessage, []byte(`{"op":"AUTH","token":"admin"}`)); err != nil {
				t.Fatal(err)
			}
			// Not reading means not answering pings. The gateway gives up
			// after IdleTimeout and closes; the close frame waits in our
			// receive buffer. (Pongs sent late would only reset the
			// closed socket.)
			conn.SetPingHandler(func(string) error { return nil })
			c := newWSClientDelayed(t, conn, 800*time.Millisecond)
			if got := c.waitClose(5 * time.Second); got != wire.CloseIdle {
				t.Fatalf("close %d, want %d", got, wire.CloseIdle)
			}
		}},
		{wire.CodeSlowClient, "fake transport", testSlowClient},
		{wire.CodeLimitExceeded, "one group too many", func(t *testing.T) {
			if _, err := bus.JetStream().CreateStream(t.Context(), njs.StreamConfig{
				Name: "GWLIMIT", Subjects: []string{"gwlim.t"}, Storage: njs.MemoryStorage, MaxConsumers: 1,
			}); err != nil {
				t.Fatal(err)
			}
			c := admin(t, std)
			c.ok(subscribeFrame("gwlim.t", "one", ""))
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"gwlim.t","group":"two"}`, wire.CodeLimitExceeded, false)
			stillOpen(t, c)
		}},
		{wire.CodeStorageFull, "a topic larger than the disk", func(t *testing.T) {
			full := newBus(t, func(oc *jetstream.OpenConfig) {
				oc.Bus.Topics = []jetstream.TopicConfig{{Pattern: "huge.t", MaxBytes: 1 << 60}}
			})
			g := newGateway(t, full, Config{})
			c := dialAuth(t, g.url, "")
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"huge.t","payload":1}`, wire.CodeStorageFull, false)
			stillOpen(t, c)
		}},
		{wire.CodeDisconnected, "an operator disconnects the session", func(t *testing.T) {
			g := newGateway(t, bus, Config{})
			c := dialAuth(t, g.url, "")
			list := g.Sessions()
			if len(list) != 1 || !g.Disconnect(list[0].ID) {
				t.Fatalf("sessions %+v", list)
			}
			if got := c.waitClose(5 * time.Second); got != wire.CloseDisconnected {
				t.Fatalf("close %d", got)
			}
		}},
		{wire.CodeGoingAway, "shutdown", func(t *testing.T) {
			g := newGateway(t, bus, Config{})
			c := dialAuth(t, g.url, "")
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
			if got := c.waitClose(5 * time.Second); got != wire.CloseGoingAway {
				t.Fatalf("close %d", got)
			}
		}},
	}
	cases = append(cases, limitCodeCases()...)
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.code] = true
		t.Run(tc.code+"/"+tc.name, tc.run)
	}
	for _, ci := range wire.Codes() {
		if !ci.ERR && ci.Close == 0 {
			continue // HTTP only: the ops endpoints' tests produce it
		}
		if !covered[ci.Code] {
			t.Errorf("code %s has no test", ci.Code)
		}
	}
}

// newWSClientDelayed starts reading conn only after d.
func newWSClientDelayed(t *testing.T, conn *websocket.Conn, d time.Duration) *wsClient {
	w := &wsClient{t: t, c: conn, notify: make(chan struct{}, 1), done: make(chan struct{})}
	timer := time.AfterFunc(d, w.readLoop)
	t.Cleanup(func() {
		conn.Close()
		if timer.Stop() {
			close(w.done)
		}
		<-w.done
	})
	return w
}
