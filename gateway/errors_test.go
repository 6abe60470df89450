package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/jetstream"
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
		f, ok := c.await(5*time.Second, func(f Frame) bool { return f.Op == OpErr })
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
		r := c.request(Frame{Op: OpAuth, Token: "admin"})
		if r.Op != OpOK {
			t.Fatalf("connection unusable after error: %+v", r)
		}
	}
	closesWith := func(t *testing.T, c *wsClient, code string, closeCode int) {
		t.Helper()
		f, ok := c.await(5*time.Second, func(f Frame) bool { return f.Op == OpErr })
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
		{CodeBadJSON, "truncated", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k"`, CodeBadJSON, true)
			rawErr(t, c, `{"op":"AUTH"} {}`, CodeBadJSON, true)
			stillOpen(t, c)
		}},
		{CodeBadFrame, "shapes", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `[1,2]`, CodeBadFrame, true)
			rawErr(t, c, `{"corr":"k"}`, CodeBadFrame, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":5,"group":"g"}`, CodeBadFrame, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"a.b","group":"g","opts":{"batchSize":"x"}}`, CodeBadFrame, false)
			if err := c.c.WriteMessage(websocket.BinaryMessage, []byte(`{"op":"AUTH"}`)); err != nil {
				t.Fatal(err)
			}
			if f, ok := c.await(5*time.Second, func(f Frame) bool { return f.Op == OpErr }); !ok || f.Code != CodeBadFrame {
				t.Fatalf("binary frame: %+v", f)
			}
			stillOpen(t, c)
		}},
		{CodeUnknownOp, "ops", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"FOO","corr":"k"}`, CodeUnknownOp, false)
			rawErr(t, c, `{"op":"EVENT","corr":"k"}`, CodeUnknownOp, false)
			rawErr(t, c, `{"op":"auth","corr":"k"}`, CodeUnknownOp, false)
			stillOpen(t, c)
		}},
		{CodeFrameTooLarge, "frames", func(t *testing.T) {
			c := admin(t, small)
			rawErr(t, c, `{"op":"PUBLISH","topic":"a.b","payload":"`+strings.Repeat("x", 5000)+`"}`, CodeFrameTooLarge, true)
			stillOpen(t, c)
			// Over four times the limit: the connection is closed (1009).
			c.sendRaw(`{"op":"PUBLISH","topic":"a.b","payload":"` + strings.Repeat("x", 20000) + `"}`)
			if got := c.waitClose(5 * time.Second); got != CloseMessageTooBig {
				t.Fatalf("close %d, want 1009", got)
			}
		}},
		{CodeUnauthorized, "before auth", func(t *testing.T) {
			c := dial(t, std.url)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"a.b","payload":1}`, CodeUnauthorized, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"a.b","group":"g"}`, CodeUnauthorized, false)
			stillOpen(t, c)
		}},
		{CodeBadToken, "wrong token", func(t *testing.T) {
			c := dial(t, std.url)
			c.send(Frame{Op: OpAuth, Token: "nope"})
			closesWith(t, c, CodeBadToken, CloseBadToken)
		}},
		{CodeBadToken, "expired token", func(t *testing.T) {
			c := dial(t, std.url)
			c.send(Frame{Op: OpAuth, Token: "stale"})
			closesWith(t, c, CodeBadToken, CloseBadToken)
		}},
		{CodeTokenExpired, "expires during session", func(t *testing.T) {
			c := dialAuth(t, std.url, "short")
			closesWith(t, c, CodeTokenExpired, CloseTokenExpired)
		}},
		{CodeAuthTimeout, "no auth", func(t *testing.T) {
			c := dial(t, quick.url)
			closesWith(t, c, CodeAuthTimeout, CloseAuthTimeout)
		}},
		{CodeForbidden, "acl", func(t *testing.T) {
			c := dialAuth(t, std.url, "limited")
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"no.t","payload":1}`, CodeForbidden, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"no.t","group":"mine"}`, CodeForbidden, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"ok.t","group":"theirs"}`, CodeForbidden, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"ok.t","group":"mine","opts":{"topics":["no.t"]}}`, CodeForbidden, false)
			rawErr(t, c, `{"op":"CURSOR","corr":"k","topic":"no.t","group":"mine"}`, CodeForbidden, false)
			rawErr(t, c, `{"op":"SEEK","corr":"k","topic":"no.t","group":"mine","cursor":{}}`, CodeForbidden, false)
			c.ok(Frame{Op: OpPublish, Topic: "ok.t", Payload: json.RawMessage(`1`)})
		}},
		{CodeBadRequest, "fields", func(t *testing.T) {
			c := admin(t, std)
			c.ok(subscribeFrame("br.t", "g", ""))
			rawErr(t, c, `{"op":"ACK","corr":"k","topic":"br.t","group":"g"}`, CodeBadRequest, false)
			rawErr(t, c, `{"op":"MODACK","corr":"k","topic":"br.t","group":"g","id":"x","extend_ms":-1}`, CodeBadRequest, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"br.u","group":"g","opts":{"maxAttempts":5000}}`, CodeBadRequest, false)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"br.u","group":"g","opts":{"from":"sometime"}}`, CodeBadRequest, false)
			rawErr(t, c, `{"op":"SEEK","corr":"k","topic":"br.t","group":"g"}`, CodeBadRequest, false)
		}},
		{CodeBadTopic, "topics", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"a b","group":"g"}`, CodeBadTopic, false)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","payload":1}`, CodeBadTopic, false)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"a.>","payload":1}`, CodeBadTopic, false)
		}},
		{CodeBadGroup, "groups", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"a.b","group":"a b"}`, CodeBadGroup, false)
			rawErr(t, c, `{"op":"CURSOR","corr":"k","topic":"a.b","group":"a b"}`, CodeBadGroup, false)
		}},
		{CodeBadPayload, "payloads", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"a.b"}`, CodeBadPayload, false)
		}},
		{CodeBadKey, "key", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"a.b","payload":1,"opts":{"key":"`+strings.Repeat("k", 2000)+`"}}`, CodeBadKey, false)
		}},
		{CodeBadID, "id", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"a.b","payload":1,"opts":{"id":"has space"}}`, CodeBadID, false)
		}},
		{CodeKeyRequired, "compacted", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"compact.state","payload":1}`, CodeKeyRequired, false)
			c.ok(Frame{Op: OpPublish, Topic: "compact.state", Payload: json.RawMessage(`1`), Opts: json.RawMessage(`{"key":"host:a:1"}`)})
		}},
		{CodeTooLarge, "store max payload", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"a.b","payload":"`+strings.Repeat("x", 300<<10)+`"}`, CodeTooLarge, false)
			stillOpen(t, c)
		}},
		{CodeAlreadySubscribed, "twice", func(t *testing.T) {
			c := admin(t, std)
			c.ok(subscribeFrame("as.t", "g", ""))
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"as.t","group":"g"}`, CodeAlreadySubscribed, false)
		}},
		{CodeNotSubscribed, "no sub", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"ACK","corr":"k","topic":"ns.t","group":"g","id":"x"}`, CodeNotSubscribed, false)
			rawErr(t, c, `{"op":"UNSUBSCRIBE","corr":"k","topic":"ns.t","group":"g"}`, CodeNotSubscribed, false)
		}},
		{CodeUnknownID, "never delivered", func(t *testing.T) {
			c := admin(t, std)
			c.ok(subscribeFrame("ui.t", "g", ""))
			rawErr(t, c, `{"op":"ACK","corr":"k","topic":"ui.t","group":"g","id":"0190f0e0-0000-7000-8000-000000000000"}`, CodeUnknownID, false)
			rawErr(t, c, `{"op":"MODACK","corr":"k","topic":"ui.t","group":"g","id":"x","extend_ms":5000}`, CodeUnknownID, false)
			// An ACK without corr is still answered when it fails.
			rawErr(t, c, `{"op":"NACK","topic":"ui.t","group":"g","id":"x"}`, CodeUnknownID, true)
		}},
		{CodeNotFound, "no group", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"CURSOR","corr":"k","topic":"nf.t","group":"nobody"}`, CodeNotFound, false)
			rawErr(t, c, `{"op":"CURSOR","corr":"k","topic":"never.created","group":"nobody"}`, CodeNotFound, false)
		}},
		{CodeUnsupported, "no live reader", func(t *testing.T) {
			c := admin(t, plain)
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"un.t"}`, CodeUnsupported, false)
		}},
		{CodePublishFailed, "store error", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"fault.publish","payload":1}`, CodePublishFailed, false)
		}},
		{CodeUnavailable, "timeout", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"CURSOR","corr":"k","topic":"fault.unavailable","group":"g"}`, CodeUnavailable, false)
		}},
		{CodeClosed, "bus closed", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"CURSOR","corr":"k","topic":"fault.closed","group":"g"}`, CodeClosed, false)
		}},
		{CodeInternal, "unexpected", func(t *testing.T) {
			c := admin(t, std)
			rawErr(t, c, `{"op":"CURSOR","corr":"k","topic":"fault.internal","group":"g"}`, CodeInternal, false)
			stillOpen(t, c)
		}},
		{CodeServerError, "panic", func(t *testing.T) {
			c := admin(t, std)
			c.sendRaw(`{"op":"CURSOR","corr":"k","topic":"fault.panic","group":"g"}`)
			closesWith(t, c, CodeServerError, CloseServerError)
		}},
		{CodeIdle, "no pong", func(t *testing.T) {
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
			if got := c.waitClose(5 * time.Second); got != CloseIdle {
				t.Fatalf("close %d, want %d", got, CloseIdle)
			}
		}},
		{CodeSlowClient, "fake transport", testSlowClient},
		{CodeLimitExceeded, "one group too many", func(t *testing.T) {
			if _, err := bus.JetStream().CreateStream(t.Context(), njs.StreamConfig{
				Name: "GWLIMIT", Subjects: []string{"gwlim.t"}, Storage: njs.MemoryStorage, MaxConsumers: 1,
			}); err != nil {
				t.Fatal(err)
			}
			c := admin(t, std)
			c.ok(subscribeFrame("gwlim.t", "one", ""))
			rawErr(t, c, `{"op":"SUBSCRIBE","corr":"k","topic":"gwlim.t","group":"two"}`, CodeLimitExceeded, false)
			stillOpen(t, c)
		}},
		{CodeStorageFull, "a topic larger than the disk", func(t *testing.T) {
			full := newBus(t, func(oc *jetstream.OpenConfig) {
				oc.Bus.Topics = []jetstream.TopicConfig{{Pattern: "huge.t", MaxBytes: 1 << 60}}
			})
			g := newGateway(t, full, Config{})
			c := dialAuth(t, g.url, "")
			rawErr(t, c, `{"op":"PUBLISH","corr":"k","topic":"huge.t","payload":1}`, CodeStorageFull, false)
			stillOpen(t, c)
		}},
		{CodeDisconnected, "an operator disconnects the session", func(t *testing.T) {
			g := newGateway(t, bus, Config{})
			c := dialAuth(t, g.url, "")
			list := g.Sessions()
			if len(list) != 1 || !g.Disconnect(list[0].ID) {
				t.Fatalf("sessions %+v", list)
			}
			if got := c.waitClose(5 * time.Second); got != CloseDisconnected {
				t.Fatalf("close %d", got)
			}
		}},
		{CodeGoingAway, "shutdown", func(t *testing.T) {
			g := newGateway(t, bus, Config{})
			c := dialAuth(t, g.url, "")
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
			if got := c.waitClose(5 * time.Second); got != CloseGoingAway {
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
	for _, ci := range Codes {
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

func TestCodeTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Codes {
		if seen[c.Code] {
			t.Errorf("duplicate code %s", c.Code)
		}
		seen[c.Code] = true
		if c.Close != 0 && c.Close != CloseGoingAway && (c.Close < 4000 || c.Close > 4999) {
			t.Errorf("%s: close code %d outside 4000-4999", c.Code, c.Close)
		}
		if !c.ERR && c.Close == 0 {
			t.Errorf("%s: neither ERR nor close", c.Code)
		}
	}
	// Every facade sentinel's code is in the table.
	for _, e := range []*facade.Error{facade.ErrBadTopic, facade.ErrBadGroup, facade.ErrBadPayload, facade.ErrBadKey,
		facade.ErrBadID, facade.ErrInvalidOption, facade.ErrKeyRequired, facade.ErrUnknownID, facade.ErrNotFound,
		ErrNotSubscribed, facade.ErrTooLarge, facade.ErrUnavailable, facade.ErrClosed} {
		if !seen[e.Code] {
			t.Errorf("facade code %s missing from the table", e.Code)
		}
	}
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), CodesMarkdown()) {
		t.Errorf("docs/protocol.md does not contain the current code table; paste:\n%s", CodesMarkdown())
	}
}
