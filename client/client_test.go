package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/gateway"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/wire"
)

func TestDial(t *testing.T) {
	bus := newBus(t)
	url, _ := serveGateway(t, bus, gateway.Config{Token: "tok"}, nil)
	ctx := context.Background()
	c, err := Dial(ctx, url, Config{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c.Close() // idempotent
	if _, err := c.Publish(ctx, "a.b", json.RawMessage(`1`), facade.PublishOptions{}); !errors.Is(err, facade.ErrClosed) {
		t.Fatalf("publish after close: %v", err)
	}
	if _, err := Dial(ctx, url, Config{Token: "wrong"}); !errors.Is(err, wire.ErrBadToken) {
		t.Fatalf("wrong token: %v", err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "ws://" + ln.Addr().String()
	ln.Close()
	if _, err := Dial(ctx, dead, Config{}); !errors.Is(err, facade.ErrUnavailable) {
		t.Fatalf("nothing listening: %v", err)
	}
}

func TestPublishSubscribeAutoAck(t *testing.T) {
	bus := newBus(t)
	url, _ := serveGateway(t, bus, gateway.Config{}, nil)
	c := dialClient(t, url, Config{})
	ctx := context.Background()

	type hb struct{ N int }
	var mu sync.Mutex
	got := map[int]facade.Delivery{}
	failed := false
	unsub, err := c.Subscribe(ctx, "cl.t", "g", facade.HandleJSON(func(ctx context.Context, d facade.Delivery, p hb) error {
		mu.Lock()
		defer mu.Unlock()
		if p.N == 3 && !failed {
			failed = true
			return errors.New("first try fails")
		}
		got[p.N] = d
		return nil
	}), facade.SubscribeOptions{From: facade.FromEarliest, MaxAttempts: 7})
	if err != nil {
		t.Fatal(err)
	}
	var last *facade.EventRecord
	for i := range 10 {
		last, err = facade.PublishJSON(ctx, c, "cl.t", hb{i}, facade.PublishOptions{Key: "k", Tags: []string{"x"}})
		if err != nil {
			t.Fatal(err)
		}
		if last.ID == "" || last.Seq != uint64(i+1) || last.Key != "k" || last.Topic != "cl.t" {
			t.Fatalf("record %+v", last)
		}
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 10 {
			return fmt.Errorf("%d of 10 handled", len(got))
		}
		return nil
	})
	mu.Lock()
	for n, d := range got {
		want := 1
		if n == 3 {
			want = 2
		}
		if d.Attempt() != want || d.Group() != "g" || d.MaxAttempts() != 7 || time.Until(d.Deadline()) > 31*time.Second || d.Deadline().IsZero() {
			t.Errorf("event %d: %+v", n, d)
		}
	}
	mu.Unlock()
	testutil.CheckFor(t, 5*time.Second, func() error {
		cur, err := c.GetCursor(ctx, "cl.t", "g")
		if err != nil || cur.LastID != last.ID || cur.Pending != 0 {
			return fmt.Errorf("cursor %+v %v", cur, err)
		}
		return nil
	})
	if err := unsub.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := unsub.Stop(ctx); err != nil {
		t.Fatal("second unsubscribe:", err)
	}
	if _, err := c.Subscribe(ctx, "bad topic", "g", func(context.Context, facade.Delivery) error { return nil }, facade.SubscribeOptions{}); !errors.Is(err, facade.ErrBadTopic) {
		t.Fatalf("bad topic: %v", err)
	}
	if _, err := c.Publish(ctx, "cl.t", json.RawMessage(`{"a":`), facade.PublishOptions{}); !errors.Is(err, facade.ErrBadPayload) {
		t.Fatalf("bad payload: %v", err)
	}
	if _, err := c.Publish(ctx, "cl..t", json.RawMessage(`1`), facade.PublishOptions{}); !errors.Is(err, facade.ErrBadTopic) {
		t.Fatalf("bad topic from the gateway: %v", err)
	}
}

func TestManualAckExtendCursor(t *testing.T) {
	bus := newBus(t)
	url, _ := serveGateway(t, bus, gateway.Config{}, nil)
	c := dialClient(t, url, Config{})
	ctx := context.Background()
	events := make(chan facade.Delivery, 10)
	ids := make(chan string, 10)
	unsub, err := c.Subscribe(ctx, "man.t", "g", func(_ context.Context, d facade.Delivery) error {
		e := d.Event()
		ids <- e.ID
		events <- d
		return nil
	}, facade.SubscribeOptions{ManualAck: true, AckTimeoutMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub.Stop(ctx)
	rec, err := c.Publish(ctx, "man.t", json.RawMessage(`"x"`), facade.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := func() (string, facade.Delivery) {
		t.Helper()
		select {
		case id := <-ids:
			return id, <-events
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery")
		}
		return "", nil
	}
	id, d := next()
	if id != rec.ID || d.Attempt() != 1 {
		t.Fatalf("delivery %s %+v", id, d)
	}
	// Extend beyond the ack timeout: no redelivery before it runs out.
	if err := d.Extend(ctx, 2500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ids:
		t.Fatal("redelivered during the extension")
	case <-time.After(1800 * time.Millisecond):
	}
	if err := d.Nack(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	id, d = next()
	if d.Attempt() != 2 {
		t.Fatalf("attempt %d", d.Attempt())
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if err := d.Ack(ctx); !errors.Is(err, facade.ErrSettled) {
		t.Fatalf("second ack: %v", err)
	}
	// Rewind with SEEK: the event comes again.
	if err := c.SetCursor(ctx, "man.t", "g", facade.CursorPosition{}); err != nil {
		t.Fatal(err)
	}
	id, d = next()
	if id != rec.ID {
		t.Fatalf("after rewind got %s", id)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetCursor(ctx, "man.t", "nobody"); !errors.Is(err, facade.ErrNotFound) {
		t.Fatalf("cursor of unknown group: %v", err)
	}
}

// The client reconnects after the gateway goes away and subscribes again.
func TestReconnectResubscribes(t *testing.T) {
	bus := newBus(t)
	c, gw := reconnectingClient(t, bus)
	ctx := context.Background()
	got := make(chan string, 10)
	if _, err := c.Subscribe(ctx, "re.t", "g", func(_ context.Context, dl facade.Delivery) error {
		e := dl.Event()
		got <- string(e.Payload)
		return nil
	}, facade.SubscribeOptions{}); err != nil {
		t.Fatal(err)
	}
	gw.stop() // the gateway shuts down: 1001 going away
	gw.restart()
	// Calls wait for the new connection; the subscription is back.
	testutil.CheckFor(t, 10*time.Second, func() error {
		_, err := c.Publish(ctx, "re.t", json.RawMessage(`"after"`), facade.PublishOptions{})
		return err
	})
	select {
	case p := <-got:
		if p != `"after"` {
			t.Fatalf("got %s", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not resubscribed")
	}
}

// A request pending when the socket drops fails with ErrUnavailable; with
// NoReconnect so do later calls.
func TestPendingFailsOnDrop(t *testing.T) {
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			var f wire.Frame
			_ = wire.Decode(data, &f)
			if f.Op == wire.OpAuth {
				_ = ws.WriteMessage(websocket.TextMessage, wire.AppendOK(nil, f.Corr))
				continue
			}
			return // drop the connection instead of answering
		}
	}))
	defer srv.Close()
	c := dialClient(t, "ws"+srv.URL[len("http"):], Config{NoReconnect: true})
	ctx := context.Background()
	if _, err := c.Publish(ctx, "a.b", json.RawMessage(`1`), facade.PublishOptions{}); !errors.Is(err, facade.ErrUnavailable) {
		t.Fatalf("pending publish: %v", err)
	}
	testutil.CheckFor(t, 5*time.Second, func() error {
		if _, err := c.GetCursor(ctx, "a.b", "g"); !errors.Is(err, facade.ErrUnavailable) {
			return fmt.Errorf("after the drop: %v", err)
		}
		return nil
	})
}

// expiring grants everything until 300ms after authentication.
type expiring struct{ exp time.Time }

func (p expiring) Allow(string, string, string) bool { return true }
func (p expiring) ExpiresAt() time.Time              { return p.exp }

// Credentials that expire end the client (4501): it does not reconnect with
// them, and every call reports why.
func TestExpiredCredentialsAreTerminal(t *testing.T) {
	bus := newBus(t)
	var auths atomic.Int32
	auth := gateway.AuthenticatorFunc(func(context.Context, string) (gateway.Principal, error) {
		auths.Add(1)
		return expiring{time.Now().Add(300 * time.Millisecond)}, nil
	})
	url, _ := serveGateway(t, bus, gateway.Config{Authenticator: auth}, nil)
	c := dialClient(t, url, Config{ReconnectMin: 10 * time.Millisecond, ReconnectMax: 20 * time.Millisecond})
	ctx := context.Background()
	testutil.CheckFor(t, 5*time.Second, func() error {
		_, err := c.Publish(ctx, "exp.t", json.RawMessage(`1`), facade.PublishOptions{})
		if !errors.Is(err, wire.ErrTokenExpired) {
			return fmt.Errorf("publish: %v", err)
		}
		return nil
	})
	if n := auths.Load(); n != 1 {
		t.Fatalf("%d authentications: the client reconnected with expired credentials", n)
	}
}

// concurrency counts the handler calls running at once and the most seen.
type concurrency struct{ running, most atomic.Int32 }

func (c *concurrency) enter() {
	r := c.running.Add(1)
	for {
		m := c.most.Load()
		if r <= m || c.most.CompareAndSwap(m, r) {
			return
		}
	}
}

func (c *concurrency) leave() { c.running.Add(-1) }

// TestHandlersRunConcurrently: events that arrive together run their
// handlers at once, up to MaxInFlight, even when each handler blocks (a
// burst does not wait behind the first handler); never more than
// MaxInFlight.
func TestHandlersRunConcurrently(t *testing.T) {
	bus := newBus(t)
	url, _ := serveGateway(t, bus, gateway.Config{}, nil)
	c := dialClient(t, url, Config{})
	ctx := context.Background()
	const n, window = 12, 5
	for i := range n {
		if _, err := bus.Publish(ctx, "cl.conc", json.RawMessage(fmt.Sprint(i)), facade.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var calls concurrency
	var handled atomic.Int32
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free() // a failing check must not leave handlers blocked
	unsub, err := c.Subscribe(ctx, "cl.conc", "g", func(context.Context, facade.Delivery) error {
		calls.enter()
		<-release
		calls.leave()
		handled.Add(1)
		return nil
	}, facade.SubscribeOptions{From: facade.FromEarliest, MaxInFlight: window})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub.Stop(ctx)
	testutil.CheckFor(t, 5*time.Second, func() error {
		if r := calls.running.Load(); r != window {
			return fmt.Errorf("%d handlers running, want %d", r, window)
		}
		return nil
	})
	free()
	testutil.CheckFor(t, 10*time.Second, func() error {
		if h := handled.Load(); h != n {
			return fmt.Errorf("%d of %d handled", h, n)
		}
		return nil
	})
	if m := calls.most.Load(); m != window {
		t.Fatalf("at most %d handlers ran at once, want %d", m, window)
	}
}

// TestBurstGetsWorkers: events handed to a subscription in one go (a
// batched message) get as many running handlers as they need, up to
// MaxInFlight, although only one worker is started for the burst.
func TestBurstGetsWorkers(t *testing.T) {
	const n, window = 12, 5
	var calls concurrency
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	c := &Client{log: slog.New(slog.DiscardHandler), subs: map[subKey]*subscription{}}
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &subscription{
		c: c, key: subKey{"t", "g"}, ctx: sctx, cancel: cancel,
		opts: facade.SubscribeOptions{MaxInFlight: window}.WithDefaults(),
		idle: make(chan struct{}, 1), done: make(chan struct{}), held: map[*delivery]struct{}{},
		handler: func(context.Context, facade.Delivery) error {
			calls.enter()
			<-release
			calls.leave()
			return nil
		},
	}
	c.subs[s.key] = s
	cn := &conn{c: c, out: make(chan outFrame, n), dead: make(chan struct{})}
	now := time.Now()
	for i := range n {
		f := &wire.Frame{Op: wire.OpEvent, Topic: "t", Group: "g",
			Event: &facade.EventRecord{ID: fmt.Sprint(i), Topic: "t"}, Ctx: &wire.EventContext{Attempt: 1, AckDeadlineMs: 30_000}}
		c.dispatch(cn, f, now)
	}
	testutil.CheckFor(t, 5*time.Second, func() error {
		if r := calls.running.Load(); r != window {
			return fmt.Errorf("%d handlers running, want %d", r, window)
		}
		return nil
	})
	free()
	for range n {
		select {
		case <-cn.out: // the ACKs
		case <-time.After(10 * time.Second):
			t.Fatal("not every event was acknowledged")
		}
	}
	s.wg.Wait()
	if m := calls.most.Load(); m != window {
		t.Fatalf("at most %d handlers ran at once, want %d", m, window)
	}
}
