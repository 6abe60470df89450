package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/wire"
)

// topicPrincipal allows subscribing to the topics listed (every topic when
// nil) and expires at exp (never when zero).
type topicPrincipal struct {
	topics []string
	exp    time.Time
}

func (p topicPrincipal) Allow(action, topic, _ string) bool {
	if p.topics == nil {
		return true
	}
	for _, t := range p.topics {
		if t == topic {
			return true
		}
	}
	return false
}

func (p topicPrincipal) ExpiresAt() time.Time { return p.exp }

// principals authenticates each token as the principal the map gives.
func principals(m func(token string) Principal) Authenticator {
	return AuthenticatorFunc(func(_ context.Context, tok string) (Principal, error) {
		if p := m(tok); p != nil {
			return p, nil
		}
		return nil, wire.ErrBadToken
	})
}

// TestReAuthEndsSubscriptionsTheNewTokenCannotHold: rights are checked
// while events flow, not only at SUBSCRIBE. A narrower token ends the
// subscriptions it does not cover (ERR forbidden naming them), their
// events go back to the group at once, and the rest keep delivering.
func TestReAuthEndsSubscriptionsTheNewTokenCannotHold(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{Authenticator: principals(func(tok string) Principal {
		switch tok {
		case "wide":
			return topicPrincipal{}
		case "narrow":
			return topicPrincipal{topics: []string{"rev.keep"}}
		}
		return nil
	})})
	c := dialAuth(t, g.url, "wide")
	c.ok(subscribeFrame("rev.gone", "g", `{"from":"earliest","ackTimeoutMs":60000}`))
	c.ok(subscribeFrame("rev.keep", "g", `{"from":"earliest"}`))
	for range 3 {
		publish(t, bus, "rev.gone", `{"n":1}`)
	}
	for range 3 {
		c.mustEvent() // held, never acked
	}

	c.ok(wire.Frame{Op: wire.OpAuth, Token: "narrow"})
	e, ok := c.await(5*time.Second, func(f wire.Frame) bool { return f.Op == wire.OpErr && f.Code == wire.CodeForbidden })
	if !ok {
		t.Fatal("no ERR forbidden for the revoked subscription")
	}
	if e.Topic != "rev.gone" || e.Group != "g" || !strings.Contains(e.Msg, "rev.gone") {
		t.Fatalf("ERR does not name the subscription: %+v", e)
	}
	// The subscription is gone: no more events of it, and UNSUBSCRIBE says so.
	publish(t, bus, "rev.gone", `{"n":2}`)
	c.errCode(wire.Frame{Op: wire.OpUnsubscribe, Topic: "rev.gone", Group: "g"}, wire.CodeNotSubscribed)
	// The one the new token covers still delivers.
	publish(t, bus, "rev.keep", `{"n":3}`)
	if ev := c.mustEvent(); ev.Topic != "rev.keep" {
		t.Fatalf("EVENT of %s after its subscription was revoked", ev.Topic)
	}
	// The held events went back to the group at once, not after their 60 s
	// lease: another member gets all four.
	other := dialAuth(t, g.url, "wide")
	other.ok(subscribeFrame("rev.gone", "g", `{"from":"earliest"}`))
	for range 4 {
		ev, ok := other.event(10 * time.Second)
		if !ok {
			t.Fatal("the revoked subscription's events were not handed back")
		}
		other.send(ackFrame(ev))
	}
}

// TestNoEventWrittenAfterCredentialsExpire: a client that reads slowly has
// many EVENT frames queued when its credentials expire; they are dropped,
// not written after the expiry instant, and the client is told why.
func TestNoEventWrittenAfterCredentialsExpire(t *testing.T) {
	bus := newBus(t)
	exp := time.Now().Add(1500 * time.Millisecond)
	gw, err := New(bus, Config{
		MaxInflightPerSub: 1000, OutboundQueue: 2000,
		Authenticator: principals(func(string) Principal { return topicPrincipal{exp: exp} }),
	})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &recordingListener{Listener: inner, after: exp}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx, ln) }()
	defer func() { cancel(); <-served }()

	ws, _, err := dialRaw(t, "ws://"+inner.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	// The test reads its answers itself, then stops reading until after the
	// expiry, so that frames pile up in the gateway's queue.
	roundTrip := func(f wire.Frame) wire.Frame {
		b, _ := wire.Encode(&f)
		if err := ws.WriteMessage(websocket.TextMessage, b); err != nil {
			t.Fatal(err)
		}
		_, data, err := ws.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		var r wire.Frame
		_ = json.Unmarshal(data, &r)
		return r
	}
	if r := roundTrip(wire.Frame{Op: wire.OpAuth, Token: "t", Corr: "a"}); r.Op != wire.OpOK {
		t.Fatalf("AUTH: %+v", r)
	}
	if r := roundTrip(wire.Frame{Op: wire.OpSubscribe, Topic: "exp.t", Group: "g", Corr: "s", Opts: json.RawMessage(`{"from":"earliest"}`)}); r.Op != wire.OpOK {
		t.Fatalf("SUBSCRIBE: %+v", r)
	}
	payload := `{"pad":"` + strings.Repeat("x", 64<<10) + `"}`
	const n = 300 // ~19 MiB: more than loopback socket buffers hold
	for range n {
		publish(t, bus, "exp.t", payload)
	}
	time.Sleep(time.Until(exp) + 500*time.Millisecond) // the client is slow on purpose
	sawExpired := false
	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != wire.CloseTokenExpired {
				t.Fatalf("connection ended with %v, want close %d", err, wire.CloseTokenExpired)
			}
			break
		}
		var f wire.Frame
		_ = json.Unmarshal(data, &f)
		if f.Op == wire.OpErr && f.Code == wire.CodeTokenExpired {
			sawExpired = true
		}
	}
	if !sawExpired {
		t.Error("the client was not told its credentials expired")
	}
	// After the expiry only the ERR and the close frame may start on the
	// wire (a frame already being written at that instant completes).
	if late := ln.lateBytes.Load(); late > 1024 {
		t.Fatalf("%d bytes were written after the credentials expired", late)
	}
}

// recordingListener counts the bytes of writes that start after a time.
type recordingListener struct {
	net.Listener
	after     time.Time
	lateBytes atomic.Int64
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, l: l}, nil
}

type recordingConn struct {
	net.Conn
	l *recordingListener
}

func (c *recordingConn) Write(p []byte) (int, error) {
	if time.Now().After(c.l.after) {
		c.l.lateBytes.Add(int64(len(p)))
	}
	return c.Conn.Write(p)
}

// TestDroppedConnectionSpendsNoAttemptOfUnsentEvents: when a connection
// goes while EVENT frames are still queued, those events never reached the
// client: handing them back must not count an attempt. With maxAttempts 1,
// counting it would dead-letter each of them.
func TestDroppedConnectionSpendsNoAttemptOfUnsentEvents(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{MaxInflightPerSub: 1000, OutboundQueue: 2000})
	ws, _, err := dialRaw(t, g.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	send := func(f wire.Frame) {
		b, _ := wire.Encode(&f)
		if err := ws.WriteMessage(websocket.TextMessage, b); err != nil {
			t.Fatal(err)
		}
	}
	send(wire.Frame{Op: wire.OpAuth, Token: "t", Corr: "a"})
	send(wire.Frame{Op: wire.OpSubscribe, Topic: "drop.t", Group: "g", Corr: "s",
		Opts: json.RawMessage(`{"from":"earliest","maxAttempts":1,"ackTimeoutMs":60000}`)})
	payload := `{"pad":"` + strings.Repeat("x", 64<<10) + `"}`
	const n = 300 // ~19 MiB: most of it cannot be written to a client that does not read
	for range n {
		publish(t, bus, "drop.t", payload)
	}
	// The client reads nothing, then goes away.
	testutil.CheckFor(t, 60*time.Second, func() error {
		for _, sub := range g.Stats().Subscriptions {
			if sub.Topic == "drop.t" && sub.InFlight == n {
				return nil
			}
		}
		return errors.New("not all delivered to the session yet")
	})
	ws.Close()

	// Every event either comes back to another member unspent, or was
	// spent on the first client (its frame may have reached it) and, with
	// maxAttempts 1, dead-lettered. Waiting until all n are accounted for
	// does not mistake a pause of a loaded machine for the end.
	var deadMu sync.Mutex
	dead := make(map[string]bool) // ids of the dead-lettered events
	deadSub, err := bus.Subscribe(t.Context(), facade.DeadLetterTopic("drop.t"), "count", func(_ context.Context, d facade.Delivery) error {
		deadMu.Lock()
		dead[d.Event().Headers["dlq_id"]] = true
		deadMu.Unlock()
		return nil
	}, facade.SubscribeOptions{From: facade.FromEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer deadSub.Stop(context.Background())
	nDead := func() int {
		deadMu.Lock()
		defer deadMu.Unlock()
		return len(dead)
	}
	c := dialAuth(t, g.url, "")
	c.ok(subscribeFrame("drop.t", "g", `{"from":"earliest","maxAttempts":1}`))
	back := make(map[string]bool) // ids of the events that came back
	for deadline := time.Now().Add(60 * time.Second); len(back)+nDead() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d events came back and %d were dead-lettered, of %d: the rest were lost", len(back), nDead(), n)
		}
		ev, ok := c.event(100 * time.Millisecond)
		if !ok {
			continue
		}
		if ev.Ctx.Attempt != 1 || back[ev.Event.ID] {
			t.Fatalf("event %s came back as attempt %d (came back before: %v)", ev.Event.ID, ev.Ctx.Attempt, back[ev.Event.ID])
		}
		back[ev.Event.ID] = true
		c.send(ackFrame(ev))
	}
	deadMu.Lock()
	for id := range dead {
		if back[id] {
			t.Errorf("event %s came back and was dead-lettered", id)
		}
	}
	deadMu.Unlock()
	c.noEvent(3 * time.Second) // nothing is delivered again
	if got := len(back); got < n/2 {
		t.Fatalf("only %d of %d events came back; the rest were spent although never written", got, n)
	}
	t.Logf("%d of %d events came back unspent, %d were dead-lettered", len(back), n, nDead())
}
