package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/wire"
)

// The reference clients' smoke test: subscribe, publish 10, all received and ACKed,
// the group's cursor advanced.
func TestSmoke(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{Token: "secret"})
	c := dialAuth(t, g.url, "secret")
	c.ok(subscribeFrame("smoke.t", "g1", `{"from":"earliest"}`))

	var ids []string
	for i := range 10 {
		r := c.ok(wire.Frame{Op: wire.OpPublish, Topic: "smoke.t", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
		if r.ID == "" || r.Seq == 0 {
			t.Fatalf("publish OK without id/seq: %+v", r)
		}
		ids = append(ids, r.ID)
	}
	got := map[string]bool{}
	for range 10 {
		ev := c.mustEvent()
		if ev.Topic != "smoke.t" || ev.Group != "g1" || ev.Ctx.Attempt != 1 || ev.Ctx.AckDeadlineMs <= 0 {
			t.Fatalf("bad EVENT %+v ctx %+v", ev, ev.Ctx)
		}
		got[ev.Event.ID] = true
		c.ok(ackFrame(ev))
	}
	for _, id := range ids {
		if !got[id] {
			t.Fatalf("event %s not received", id)
		}
	}
	testutil.CheckFor(t, 5*time.Second, func() error {
		cur, err := bus.GetCursor(context.Background(), "smoke.t", "g1")
		if err != nil {
			return err
		}
		if cur.LastID != ids[9] || cur.LastSeq != 10 || cur.Pending != 0 {
			return fmt.Errorf("cursor %+v, want last %s", cur, ids[9])
		}
		return nil
	})
}

// The reference TypeScript clients: PromClient sends AUTH without corr and takes the first
// OK as "connected"; EventClient sends ACK without corr and expects nothing.
func TestSeedClientFrames(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	for _, path := range []string{"", "/ws"} {
		c := dial(t, g.url+path)
		c.sendRaw(`{"op":"AUTH"}`)
		if f, ok := c.await(5*time.Second, func(wire.Frame) bool { return true }); !ok || f.Op != wire.OpOK || f.Corr != "" {
			t.Fatalf("%q: AUTH without corr answered %+v", path, f)
		}
		c.sendRaw(`{"op":"SUBSCRIBE","topic":"seed.t","group":"g","opts":{"from":"earliest","manualAck":false}}`)
		c.sendRaw(`{"op":"PUBLISH","topic":"seed.t","payload":{"hello":"world"}}`)
		ev := c.mustEvent()
		if string(ev.Event.Payload) != `{"hello":"world"}` {
			t.Fatalf("payload %s", ev.Event.Payload)
		}
		c.sendRaw(fmt.Sprintf(`{"op":"ACK","topic":"seed.t","group":"g","id":%q}`, ev.Event.ID))
		// An ACK without corr is answered only on error: the next frame
		// answers the CURSOR.
		testutil.CheckFor(t, 5*time.Second, func() error {
			r := c.request(wire.Frame{Op: wire.OpCursor, Topic: "seed.t", Group: "g"})
			if r.Op != wire.OpOK || r.Cursor == nil || r.Cursor.LastID != ev.Event.ID {
				return fmt.Errorf("cursor after ACK: %+v", r)
			}
			return nil
		})
		c.ok(wire.Frame{Op: wire.OpUnsubscribe, Topic: "seed.t", Group: "g"})
	}
}

func TestNackRedeliversWithNextAttempt(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	c := dialAuth(t, g.url, "")
	c.ok(subscribeFrame("nack.t", "g", ""))
	rec := publish(t, bus, "nack.t", `1`)
	ev := c.mustEvent()
	if ev.Event.ID != rec.ID || ev.Ctx.Attempt != 1 {
		t.Fatalf("first delivery %+v", ev.Ctx)
	}
	c.ok(wire.Frame{Op: wire.OpNack, Topic: "nack.t", Group: "g", ID: rec.ID, Reason: "try again"})
	ev = c.mustEvent()
	if ev.Event.ID != rec.ID || ev.Ctx.Attempt != 2 {
		t.Fatalf("redelivery attempt %d, want 2", ev.Ctx.Attempt)
	}
	// The old attempt is fenced when the frame names it.
	c.errCode(wire.Frame{Op: wire.OpAck, Topic: "nack.t", Group: "g", ID: rec.ID, Attempt: 1}, wire.CodeUnknownID)
	c.ok(wire.Frame{Op: wire.OpAck, Topic: "nack.t", Group: "g", ID: rec.ID, Attempt: 2})
	c.errCode(ackFrame(ev), wire.CodeUnknownID) // already settled
}

// A lease that expires is handed back; another member of the group gets
// it with the next attempt, and the late ACK of the first is refused.
func TestExpiredLeaseRedeliversToOtherMember(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	a := dialAuth(t, g.url, "")
	b := dialAuth(t, g.url, "")
	opts := `{"ackTimeoutMs":1000,"batchSize":1,"maxAttempts":20}`
	a.ok(subscribeFrame("lease.t", "g", opts))
	b.ok(subscribeFrame("lease.t", "g", opts))
	rec := publish(t, bus, "lease.t", `"x"`)

	// Whoever gets it first never acks; the other acks.
	var first, second *wsClient
	var ev wire.Frame
	testutil.CheckFor(t, 5*time.Second, func() error {
		if f, ok := a.event(20 * time.Millisecond); ok {
			first, second, ev = a, b, f
			return nil
		}
		if f, ok := b.event(20 * time.Millisecond); ok {
			first, second, ev = b, a, f
			return nil
		}
		return fmt.Errorf("not delivered")
	})
	if ev.Event.ID != rec.ID || ev.Ctx.Attempt != 1 || ev.Ctx.AckDeadlineMs > 1000 {
		t.Fatalf("first delivery %+v", ev.Ctx)
	}
	start := time.Now()
	// The first member may get it back too (the group chooses); it keeps
	// ignoring it until the other member has it.
	var got wire.Frame
	testutil.CheckFor(t, 15*time.Second, func() error {
		if f, ok := second.event(100 * time.Millisecond); ok {
			got = f
			return nil
		}
		return fmt.Errorf("not redelivered to the other member")
	})
	if got.Event.ID != rec.ID || got.Ctx.Attempt < 2 {
		t.Fatalf("redelivery %s attempt %d", got.Event.ID, got.Ctx.Attempt)
	}
	if d := time.Since(start); d < 800*time.Millisecond {
		t.Fatalf("redelivered after %v, before the lease expired", d)
	}
	first.errCode(ackFrame(ev), wire.CodeUnknownID) // stale: its lease expired
	second.ok(ackFrame(got))
	testutil.CheckFor(t, 5*time.Second, func() error {
		cur, err := bus.GetCursor(context.Background(), "lease.t", "g")
		if err != nil || cur.LastSeq != rec.Seq {
			return fmt.Errorf("cursor %+v %v", cur, err)
		}
		return nil
	})
}

// MODACK beyond the ack timeout keeps the event until the new deadline.
func TestModAckExtendsLease(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	c := dialAuth(t, g.url, "")
	c.ok(subscribeFrame("modack.t", "g", `{"ackTimeoutMs":1000}`))
	rec := publish(t, bus, "modack.t", `{}`)
	ev := c.mustEvent()
	extended := time.Now()
	c.ok(wire.Frame{Op: wire.OpModAck, Topic: "modack.t", Group: "g", ID: rec.ID, ExtendMs: 3000})
	// Nothing before the new deadline (the old one was at 1s)...
	c.noEvent(2500 * time.Millisecond)
	// ...the lease is still ours: a MODACK / ACK now would be accepted.
	// Let it expire instead: redelivered after 3s.
	re := c.mustEvent()
	if d := time.Since(extended); d < 2900*time.Millisecond {
		t.Fatalf("redelivered %v after MODACK 3000", d)
	}
	if re.Event.ID != ev.Event.ID || re.Ctx.Attempt != 2 {
		t.Fatalf("redelivery %+v", re.Ctx)
	}
	c.ok(ackFrame(re))
}

// TestModAckWithoutExtendRenewsTheLease: a MODACK without extend_ms renews
// the subscription's whole lease (ackTimeoutMs), it does not cut it to 1 s.
func TestModAckWithoutExtendRenewsTheLease(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	c := dialAuth(t, g.url, "")
	c.ok(subscribeFrame("modack.def", "g", `{"ackTimeoutMs":4000}`))
	rec := publish(t, bus, "modack.def", `{}`)
	c.mustEvent()
	c.ok(wire.Frame{Op: wire.OpModAck, Topic: "modack.def", Group: "g", ID: rec.ID})
	// With a 1 s lease the event would come back after about a second.
	c.noEvent(2500 * time.Millisecond)
	c.ok(wire.Frame{Op: wire.OpAck, Topic: "modack.def", Group: "g", ID: rec.ID})
}

// Closing a socket hands its in-flight events back at once.
func TestCloseHandsBackInFlight(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	a := dialAuth(t, g.url, "")
	a.ok(subscribeFrame("close.t", "g", `{"ackTimeoutMs":30000}`))
	var ids []string
	for i := range 3 {
		ids = append(ids, publish(t, bus, "close.t", fmt.Sprint(i)).ID)
	}
	for range 3 {
		a.mustEvent()
	}
	b := dialAuth(t, g.url, "")
	b.ok(subscribeFrame("close.t", "g", `{"ackTimeoutMs":30000}`))
	closed := time.Now()
	a.c.Close()
	got := map[string]int{}
	for range 3 {
		ev := b.mustEvent()
		got[ev.Event.ID] = ev.Ctx.Attempt
		b.ok(ackFrame(ev))
	}
	if d := time.Since(closed); d > time.Second {
		t.Fatalf("handed back after %v, want < 1s", d)
	}
	for _, id := range ids {
		if got[id] != 2 {
			t.Fatalf("event %s: attempt %d, want 2 (%v)", id, got[id], got)
		}
	}
}

// A subscription with a small window loses nothing: the bus pauses instead
// of the gateway dropping.
func TestFullSubscriptionLosesNothing(t *testing.T) {
	bus := newBus(t)
	const window = 5
	g := newGateway(t, bus, Config{MaxInflightPerSub: window})
	c := dialAuth(t, g.url, "")
	c.ok(subscribeFrame("full.t", "g", `{"from":"earliest"}`))
	const n = 10 * window
	for i := range n {
		publish(t, bus, "full.t", fmt.Sprint(i))
	}
	seen := map[string]int{}
	for len(seen) < n {
		// Take what the window allows, check it is never exceeded, then
		// ack the batch.
		var batch []wire.Frame
		ev := c.mustEvent()
		batch = append(batch, ev)
		for {
			ev, ok := c.event(200 * time.Millisecond)
			if !ok {
				break
			}
			batch = append(batch, ev)
		}
		if len(batch) > window {
			t.Fatalf("%d events in flight, window %d", len(batch), window)
		}
		for _, ev := range batch {
			seen[ev.Event.ID]++
			if ev.Ctx.Attempt != 1 {
				t.Fatalf("event %s redelivered (attempt %d)", ev.Event.ID, ev.Ctx.Attempt)
			}
			c.ok(ackFrame(ev))
		}
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("event %s delivered %d times", id, k)
		}
	}
	c.noEvent(300 * time.Millisecond)
}

// A redelivery of an id still in flight supersedes the lease: the id is
// never in flight twice on one subscription.
func TestSameIDNeverInFlightTwice(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	c := dialAuth(t, g.url, "")
	c.ok(subscribeFrame("dup.t", "g", `{"from":"earliest"}`))
	for i := range 3 {
		publish(t, bus, "dup.t", fmt.Sprint(i))
	}
	for range 3 {
		c.mustEvent()
	}
	// Rewind the group: the bus delivers the same three events again while
	// they are still leased here.
	c.ok(wire.Frame{Op: wire.OpSeek, Topic: "dup.t", Group: "g", Cursor: &facade.CursorPosition{}})
	var again []wire.Frame
	for range 3 {
		again = append(again, c.mustEvent())
	}
	g.mu.Lock()
	var s *session
	for ss := range g.sessions {
		s = ss
	}
	g.mu.Unlock()
	s.mu.Lock()
	n, total := len(s.subs[subKey{"dup.t", "g"}].leases), s.leasesLocked()
	s.mu.Unlock()
	if n != 3 || total != 3 {
		t.Fatalf("%d leases on the subscription (%d in the session), want 3", n, total)
	}
	for _, ev := range again {
		c.ok(ackFrame(ev))
		c.errCode(ackFrame(ev), wire.CodeUnknownID)
	}
}

func TestOriginCheck(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{AllowedOrigins: []string{"https://app.example.com"}})
	open := newGateway(t, bus, Config{AllowedOrigins: []string{"*"}})
	cases := []struct {
		name   string
		g      *testGateway
		origin string
		want   bool
	}{
		{"no origin", g, "", true},
		{"same origin", g, g.http, true},
		{"allowlisted", g, "https://app.example.com", true},
		{"cross origin", g, "https://evil.example.com", false},
		{"scheme differs", g, "http://app.example.com", false},
		{"star", open, "https://evil.example.com", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string][]string{}
			if tc.origin != "" {
				h["Origin"] = []string{tc.origin}
			}
			c, resp, err := dialRaw(t, tc.g.url, h)
			if tc.want {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				c.Close()
				return
			}
			if err == nil {
				c.Close()
				t.Fatal("cross-origin handshake accepted")
			}
			if resp == nil || resp.StatusCode != 403 {
				t.Fatalf("got %v, want 403", resp)
			}
		})
	}
}

func TestShutdownGoingAwayHandsBack(t *testing.T) {
	bus := newBus(t)
	g1 := newGateway(t, bus, Config{})
	g2 := newGateway(t, bus, Config{})
	a := dialAuth(t, g1.url, "")
	a.ok(subscribeFrame("shut.t", "g", ""))
	rec := publish(t, bus, "shut.t", `1`)
	a.mustEvent()
	b := dialAuth(t, g2.url, "")
	b.ok(subscribeFrame("shut.t", "g", ""))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g1.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if code := a.waitClose(5 * time.Second); code != wire.CloseGoingAway {
		t.Fatalf("close code %d, want %d", code, wire.CloseGoingAway)
	}
	ev := b.mustEvent()
	if ev.Event.ID != rec.ID || ev.Ctx.Attempt != 2 {
		t.Fatalf("redelivery %+v", ev.Ctx)
	}
	b.ok(ackFrame(ev))
	// A shut-down gateway refuses new connections.
	if c, _, err := dialRaw(t, g1.url, nil); err == nil {
		c.Close()
		t.Fatal("connected after shutdown")
	}
}

// TestGroupAckWaitIsTheDocumentedCrashCost: after a hub crash, a group gets
// back the events the hub held when the group's ack wait runs out. As
// documented, that is the members' ackTimeoutMs, for WebSocket and Go
// members alike, and nothing more.
func TestGroupAckWaitIsTheDocumentedCrashCost(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	c := dialAuth(t, g.url, "")
	c.ok(subscribeFrame("crash.ws", "g", `{"ackTimeoutMs":3000}`))
	nop := func(context.Context, facade.Delivery) error { return nil }
	unsub, err := bus.Subscribe(t.Context(), "crash.go", "g", nop, facade.SubscribeOptions{AckTimeoutMs: 3000})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub.Stop(context.Background())
	for topic, want := range map[string]time.Duration{"crash.ws": 3 * time.Second, "crash.go": 3 * time.Second} {
		ti, err := bus.LookupTopic(t.Context(), topic)
		if err != nil {
			t.Fatal(err)
		}
		cons, err := ti.Stream.Consumer(t.Context(), "g")
		if err != nil {
			t.Fatal(err)
		}
		if got := cons.CachedInfo().Config.AckWait; got != want {
			t.Errorf("%s: the group's ack wait is %v, want %v", topic, got, want)
		}
	}
}
