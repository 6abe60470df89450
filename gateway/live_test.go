package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/wire"
	njs "github.com/nats-io/nats.go/jetstream"
)

func liveFrame(topic, opts string) wire.Frame { return subscribeFrame(topic, "", opts) }

// liveEvents awaits n EVENTs of a live subscription and returns their
// events.
func (w *wsClient) liveEvents(n int) []*facade.EventRecord {
	w.t.Helper()
	out := make([]*facade.EventRecord, 0, n)
	for range n {
		f, ok := w.await(10*time.Second, func(f wire.Frame) bool { return f.Op == wire.OpEvent && f.Group == "" })
		if !ok {
			w.t.Fatalf("no live EVENT (closed: %v)", w.closeErr())
		}
		if f.Ctx != nil || f.Event.Seq == 0 {
			w.t.Fatalf("live EVENT with ctx %+v, seq %d", f.Ctx, f.Event.Seq)
		}
		out = append(out, f.Event)
	}
	return out
}

// TestLiveFanOut: every live subscriber of a topic gets every event
// published after its SUBSCRIBE, in order, with its position, from one
// follower per topic; group and live subscriptions share a connection.
func TestLiveFanOut(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	a, b := dialAuth(t, g.url, ""), dialAuth(t, g.url, "")
	publish(t, bus, "live.t", `"before"`)
	if ok := a.ok(liveFrame("live.t", "")); ok.Recovered != nil {
		t.Fatalf("plain live OK %+v", ok)
	}
	b.ok(liveFrame("live.t", ""))
	b.ok(subscribeFrame("live.t", "workers", ""))
	a.errCode(liveFrame("live.t", ""), wire.CodeAlreadySubscribed)
	followers := g.live.len()
	if followers != 1 {
		t.Fatalf("%d followers for one topic", followers)
	}
	if st := g.Stats(); st.LiveSubscribers["live.t"] != 2 || st.GroupMembers != 1 {
		t.Fatalf("stats: %d live subscribers of live.t, %d group members; want 2 and 1", st.LiveSubscribers["live.t"], st.GroupMembers)
	}
	var sent []*facade.EventRecord
	for i := range 5 {
		sent = append(sent, publish(t, bus, "live.t", fmt.Sprint(i)))
	}
	for _, c := range []*wsClient{a} {
		got := c.liveEvents(5)
		for i, e := range got {
			if e.ID != sent[i].ID || e.Seq != sent[i].Seq {
				t.Fatalf("live event %d: %s at %d, want %s at %d", i, e.ID, e.Seq, sent[i].ID, sent[i].Seq)
			}
		}
	}
	// A new subscriber's OK says where its live events continue, so that
	// it can recover even before its first event.
	d := dialAuth(t, g.url, "")
	if ok := d.ok(liveFrame("live.t", "")); ok.Seq != sent[4].Seq || ok.Recovered != nil {
		t.Fatalf("OK %+v, want seq %d", ok, sent[4].Seq)
	}
	// b has both: five live EVENTs and five of the group.
	live, group := 0, 0
	for range 10 {
		f := b.mustEvent()
		if f.Group == "" {
			live++
		} else {
			group++
			b.send(ackFrame(f))
		}
	}
	if live != 5 || group != 5 {
		t.Fatalf("connection with both got %d live and %d group events", live, group)
	}
	a.ok(wire.Frame{Op: wire.OpUnsubscribe, Topic: "live.t"})
	publish(t, bus, "live.t", `"after"`)
	a.noEvent(300 * time.Millisecond)
	b.liveEvents(1)
	if st := g.Stats(); st.LiveFanout < 11 {
		t.Fatalf("live fan-out %d, want at least 11", st.LiveFanout)
	}
	b.c.Close()
	d.c.Close()
	testutil.CheckFor(t, 5*time.Second, func() error {
		if n := g.live.len(); n != 0 {
			return fmt.Errorf("%d followers left", n)
		}
		return nil
	})
}

// TestLiveRecovery: a client that comes back with the position of the
// last event it saw gets what it missed, then the live events, with no gap
// and no duplicate even while events are being published; through another
// gateway on the same store too.
func TestLiveRecovery(t *testing.T) {
	bus := newBus(t)
	g1 := newGateway(t, bus, Config{})
	b2, err := jetstream.New(bus.Conn(), jetstream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.Close() })
	g2 := newGateway(t, b2, Config{})
	a := dialAuth(t, g1.url, "")
	a.ok(liveFrame("rec.t", ""))
	first := publish(t, bus, "rec.t", `"seen"`)
	if got := a.liveEvents(1); got[0].Seq != first.Seq {
		t.Fatalf("seq %d, want %d", got[0].Seq, first.Seq)
	}
	a.c.Close()
	var missed []*facade.EventRecord
	for i := range 3 {
		missed = append(missed, publish(t, bus, "rec.t", fmt.Sprint(i)))
	}
	// Publish on while the client recovers through the other gateway.
	var mu sync.Mutex
	var during []*facade.EventRecord
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			e, err := bus.Publish(context.Background(), "rec.t", json.RawMessage(fmt.Sprint(100+i)), facade.PublishOptions{})
			if err != nil {
				return
			}
			mu.Lock()
			during = append(during, e)
			mu.Unlock()
		}
	}()
	c := dialAuth(t, g2.url, "")
	ok := c.ok(liveFrame("rec.t", fmt.Sprintf(`{"since":{"seq":%d}}`, first.Seq)))
	if ok.Recovered == nil || !*ok.Recovered {
		t.Fatalf("OK %+v, want recovered", ok)
	}
	mu.Lock()
	at := len(during)
	mu.Unlock()
	testutil.CheckFor(t, 5*time.Second, func() error { // a few more, published live
		mu.Lock()
		defer mu.Unlock()
		if len(during) < at+20 {
			return fmt.Errorf("%d published since the OK", len(during)-at)
		}
		return nil
	})
	close(stop)
	<-done
	mu.Lock()
	want := append(missed, during...)
	mu.Unlock()
	got := c.liveEvents(len(want))
	for i := range want {
		if got[i].ID != want[i].ID {
			t.Fatalf("event %d: %s (seq %d), want %s (seq %d)", i, got[i].ID, got[i].Seq, want[i].ID, want[i].Seq)
		}
	}
	c.noEvent(200 * time.Millisecond)
}

// TestLiveRecoveryIncomplete: when the stream no longer holds the position,
// or more than the recovery limit follows it, the OK says recovered: false
// (with the oldest position still held) and live events follow.
func TestLiveRecoveryIncomplete(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{LiveRecoveryLimit: 3})
	var sent []*facade.EventRecord
	for i := range 8 {
		sent = append(sent, publish(t, bus, "inc.t", fmt.Sprint(i)))
	}
	c := dialAuth(t, g.url, "")
	ok := c.ok(liveFrame("inc.t", fmt.Sprintf(`{"since":{"seq":%d}}`, sent[0].Seq)))
	if ok.Recovered == nil || *ok.Recovered {
		t.Fatalf("OK %+v after a recovery over the limit, want recovered false", ok)
	}
	if got := c.liveEvents(3); got[0].ID != sent[1].ID || got[2].ID != sent[3].ID {
		t.Fatalf("recovered %s..%s", got[0].ID, got[2].ID)
	}
	next := publish(t, bus, "inc.t", `"live"`)
	if got := c.liveEvents(1); got[0].ID != next.ID {
		t.Fatalf("live after an incomplete recovery: %s, want %s", got[0].ID, next.ID)
	}

	ti, err := bus.LookupTopic(t.Context(), "inc.t")
	if err != nil {
		t.Fatal(err)
	}
	if err := ti.Stream.Purge(t.Context(), njs.WithPurgeSequence(sent[5].Seq)); err != nil {
		t.Fatal(err)
	}
	d := dialAuth(t, g.url, "")
	ok = d.ok(liveFrame("inc.t", fmt.Sprintf(`{"since":{"seq":%d}}`, sent[2].Seq)))
	if ok.Recovered == nil || *ok.Recovered || ok.First != sent[5].Seq {
		t.Fatalf("OK %+v after retention removed the position, want recovered false, first %d", ok, sent[5].Seq)
	}
}

// TestLiveSnapshot: a live subscription with snapshot gets the newest
// event of every key, then the OK with the snapshot's position, then live.
func TestLiveSnapshot(t *testing.T) {
	bus := newBus(t, func(oc *jetstream.OpenConfig) {
		oc.Bus.Topics = append(oc.Bus.Topics, jetstream.TopicConfig{Pattern: "snap.state", Compaction: true})
	})
	g := newGateway(t, bus, Config{})
	pubKey := func(key, v string) *facade.EventRecord {
		e, err := bus.Publish(t.Context(), "snap.state", json.RawMessage(v), facade.PublishOptions{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	pubKey("a", "1")
	pubKey("b", "1")
	a2 := pubKey("a", "2")
	c := dialAuth(t, g.url, "")
	ok := c.ok(liveFrame("snap.state", `{"snapshot":true}`))
	if ok.Recovered == nil || !*ok.Recovered || ok.Seq != a2.Seq {
		t.Fatalf("snapshot OK %+v, want recovered at %d", ok, a2.Seq)
	}
	got := c.liveEvents(2)
	keys := map[string]string{}
	for _, e := range got {
		keys[e.Key] = string(e.Payload)
	}
	if keys["a"] != "2" || keys["b"] != "1" {
		t.Fatalf("snapshot %v", keys)
	}
	b2 := pubKey("b", "2")
	if got := c.liveEvents(1); got[0].ID != b2.ID {
		t.Fatalf("after the snapshot got %s, want %s", got[0].ID, b2.ID)
	}
}

// TestLiveRefusals: a live subscription needs the subscribe right on the
// topic (with no group); a revoked one ends on re-AUTH.
func TestLiveRefusals(t *testing.T) {
	bus := newBus(t)
	auth := AuthenticatorFunc(func(_ context.Context, token string) (Principal, error) {
		prefix, ok := strings.CutPrefix(token, "sub:")
		if !ok {
			return nil, errors.New("unknown token")
		}
		return testPrincipal{sub: []string{prefix}}, nil
	})
	g := newGateway(t, bus, Config{Authenticator: auth})
	c := dialAuth(t, g.url, "sub:allowed.")
	c.errCode(liveFrame("secret.t", ""), wire.CodeForbidden)
	c.ok(liveFrame("allowed.t", ""))
	c.errCode(liveFrame("allowed.u", `{"since":{"seq":1},"snapshot":true}`), wire.CodeBadRequest)
	c.errCode(liveFrame("allowed.u", `{"Since":{"seq":1}}`), wire.CodeBadFrame)
	c.ok(wire.Frame{Op: wire.OpAuth, Token: "sub:other."})
	if f, ok := c.await(5*time.Second, func(f wire.Frame) bool { return f.Op == wire.OpErr && f.Topic == "allowed.t" }); !ok || f.Code != wire.CodeForbidden {
		t.Fatalf("no forbidden ERR for the revoked live subscription: %+v", f)
	}
	publish(t, bus, "allowed.t", `1`)
	c.noEvent(300 * time.Millisecond)
}

// TestLiveSlowClientDropped: a live subscriber whose queue is full is
// disconnected as slow; the other subscribers of the topic go on.
func TestLiveSlowClientDropped(t *testing.T) {
	bus := newBus(t)
	s, ft := newTestSession(t, bus, Config{})
	s.handleFrame(t, wire.Frame{Op: wire.OpAuth})
	g := s.gw
	srv := newGateway(t, bus, Config{})
	other := dialAuth(t, srv.url, "")
	other.ok(liveFrame("slowlive.t", ""))
	s.handleFrame(t, wire.Frame{Op: wire.OpSubscribe, Corr: "s", Topic: "slowlive.t"})
	ft.mu.Lock()
	ft.full = true
	ft.mu.Unlock()
	e := publish(t, bus, "slowlive.t", `1`)
	testutil.CheckFor(t, 5*time.Second, func() error {
		if _, code, aborted := ft.snapshot(); code != wire.CloseSlowClient || !aborted {
			return fmt.Errorf("close %d aborted %v", code, aborted)
		}
		return nil
	})
	if g.liveDrops.Load() != 1 {
		t.Fatalf("%d live drops counted", g.liveDrops.Load())
	}
	if got := other.liveEvents(1); got[0].ID != e.ID {
		t.Fatalf("the other subscriber got %s, want %s", got[0].ID, e.ID)
	}
}

// TestLiveStalledConnection: a connection that stalls the fan-out (its
// queue never returns) holds back at most the subscriptions of its shard;
// the topic's other shards go on, subscriptions of its shard can end, and
// the shard resumes once it returns.
func TestLiveStalledConnection(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	ft := &fakeTransport{stall: make(chan struct{})}
	s := newSession(g.Gateway, ft, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { s.end("test over") })
	release := sync.OnceFunc(func() { close(ft.stall) })
	t.Cleanup(release) // before the session ends, when the test failed
	s.handleFrame(t, wire.Frame{Op: wire.OpAuth})
	s.handleFrame(t, wire.Frame{Op: wire.OpSubscribe, Corr: "s", Topic: "stall.t"})
	testutil.CheckFor(t, 5*time.Second, func() error {
		if n := g.Stats().LiveSubscribers["stall.t"]; n != 1 {
			return fmt.Errorf("%d live subscribers", n)
		}
		return nil
	})
	// The stalled one and the first liveShardSize-1 of these fill the
	// first shard; the last opens the second.
	var cs []*wsClient
	for range liveShardSize {
		c := dialAuth(t, g.url, "")
		c.ok(liveFrame("stall.t", ""))
		cs = append(cs, c)
	}
	var sent []*facade.EventRecord
	for i := range 3 {
		sent = append(sent, publish(t, bus, "stall.t", fmt.Sprint(i)))
	}
	free, quitter, held := cs[len(cs)-1], cs[0], cs[1:len(cs)-1]
	free.liveEvents(3)
	held[0].noEvent(200 * time.Millisecond) // behind the stalled one, in its shard
	// A subscription of the stalled shard ends without waiting for it,
	// and the other shard goes on meanwhile.
	quitter.ok(wire.Frame{Op: wire.OpUnsubscribe, Topic: "stall.t"})
	sent = append(sent, publish(t, bus, "stall.t", "3"))
	free.liveEvents(1)
	release()
	for _, c := range held {
		for i, e := range c.liveEvents(4) {
			if e.ID != sent[i].ID {
				t.Fatalf("event %d: %s, want %s", i, e.ID, sent[i].ID)
			}
		}
	}
	quitter.noEvent(200 * time.Millisecond)
	testutil.CheckFor(t, 5*time.Second, func() error {
		frames, _, _ := ft.snapshot()
		if n := len(frames); n != 1+1+4 { // OK of AUTH, of SUBSCRIBE, 4 EVENTs
			return fmt.Errorf("%d frames", n)
		}
		return nil
	})
}
