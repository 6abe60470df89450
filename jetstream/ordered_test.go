package jetstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
)

// keyTracker watches the handlers of an ordered group across hubs: a key
// must never be in two handlers at once, and its events must come in
// order (a redelivery repeats the last one at most).
type keyTracker struct {
	mu       sync.Mutex
	holder   map[string]string // key → hub whose handler has it
	next     map[string]int    // key → the n its next event has
	dead     map[string]bool   // hubs that crashed: their handlers no longer count
	problems []string
}

func newKeyTracker() *keyTracker {
	return &keyTracker{holder: map[string]string{}, next: map[string]int{}, dead: map[string]bool{}}
}

// begin records that hub's handler starts event n of key; false when hub
// crashed.
func (k *keyTracker) begin(hub, key string, n int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dead[hub] {
		return false
	}
	if h := k.holder[key]; h != "" {
		k.problems = append(k.problems, fmt.Sprintf("%s:%d started on %s while %s held the key", key, n, hub, h))
	}
	if n != k.next[key] {
		k.problems = append(k.problems, fmt.Sprintf("%s:%d started on %s when %s:%d was next", key, n, hub, key, k.next[key]))
	}
	k.holder[key] = hub
	return true
}

// end records that hub's handler of key returned, done or not.
func (k *keyTracker) end(hub, key string, n int, done bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dead[hub] {
		return
	}
	delete(k.holder, key)
	if done {
		k.next[key] = n + 1
	}
}

// crash forgets what hub held: its process is gone.
func (k *keyTracker) crash(hub string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead[hub] = true
	for key, h := range k.holder {
		if h == hub {
			delete(k.holder, key)
		}
	}
}

func (k *keyTracker) held(hub string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, h := range k.holder {
		if h == hub {
			n++
		}
	}
	return n
}

// waitDone waits until every key handled perKey events, then checks.
func (k *keyTracker) waitDone(t *testing.T, keys []string, perKey int) {
	t.Helper()
	testutil.CheckFor(t, 30*time.Second, func() error {
		k.mu.Lock()
		defer k.mu.Unlock()
		for _, key := range keys {
			if k.next[key] != perKey {
				return fmt.Errorf("key %s at event %d of %d", key, k.next[key], perKey)
			}
		}
		return nil
	})
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.problems) > 0 {
		t.Fatalf("ordered group broke its order: %v", k.problems)
	}
}

// handler is an ordered member's handler on hub: it holds each event
// until hold returns.
func (k *keyTracker) handler(t *testing.T, hub string, hold func(ctx context.Context, key string, n int) bool) facade.Handler {
	return func(ctx context.Context, d facade.Delivery) error {
		e := d.Event()
		var v struct{ N int }
		if err := json.Unmarshal(e.Payload, &v); err != nil {
			t.Errorf("payload %s: %v", e.Payload, err)
			return nil
		}
		if !k.begin(hub, e.Key, v.N) {
			return nil
		}
		done := hold(ctx, e.Key, v.N)
		k.end(hub, e.Key, v.N, done)
		if !done {
			return ctx.Err()
		}
		return nil
	}
}

// work holds an event for a moment, as a handler's work would.
func work(ctx context.Context, _ string, _ int) bool {
	select {
	case <-time.After(5 * time.Millisecond):
		return true
	case <-ctx.Done():
		return false
	}
}

// publishKeyed publishes {"n":from} … {"n":to-1} for each key.
func publishKeyed(t *testing.T, b facade.Publisher, topic string, keys []string, from, to int) {
	t.Helper()
	for n := from; n < to; n++ {
		for _, key := range keys {
			if _, err := b.Publish(t.Context(), topic, json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)), facade.PublishOptions{Key: key}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// hubOn is a bus of its own on srv, as a separate hub process would be,
// and the connection it runs on.
func hubOn(t *testing.T, srv *server.Server) (*jetstream.Bus, *nats.Conn) {
	t.Helper()
	nc := natstest.InProcessConn(t, srv)
	b, err := jetstream.New(nc, jetstream.Config{PullExpiry: 1200 * time.Millisecond, PullHeartbeat: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, nc
}

// TestOrderedHandOverBetweenHubs: two hubs serve one ordered group; one
// closes under load. A key is never in both hubs' handlers at once, and
// each key's events are handled in order.
func TestOrderedHandOverBetweenHubs(t *testing.T) {
	srv := natstest.RunEmbedded(t)
	a, _ := hubOn(t, srv)
	b, _ := hubOn(t, srv)
	const topic, group, perKey = "ord.handover", "g", 30
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5"}
	k := newKeyTracker()
	opts := facade.SubscribeOptions{From: facade.FromEarliest, OrderBy: facade.OrderByKey, MaxInFlight: 4}
	publishKeyed(t, a, topic, keys, 0, perKey)
	if _, err := a.Subscribe(t.Context(), topic, group, k.handler(t, "a", work), opts); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe(t.Context(), topic, group, k.handler(t, "b", work), opts); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.next["k0"] < 5 {
			return fmt.Errorf("k0 at %d", k.next["k0"])
		}
		return nil
	})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	k.waitDone(t, keys, perKey)
}

// pinToA subscribes hub a to the ordered group, publishes events 0 to
// perKey-1 of every key and waits until a's handler (hold) holds every key;
// then hub b joins with a handler that works. b joins only then: joined
// together, either may be the first to pull, and so the one the group pins.
func pinToA(t *testing.T, a, b *jetstream.Bus, topic, group string, keys []string, perKey int, k *keyTracker,
	hold func(ctx context.Context, key string, n int) bool, opts facade.SubscribeOptions) {
	t.Helper()
	if _, err := a.Subscribe(t.Context(), topic, group, k.handler(t, "a", hold), opts); err != nil {
		t.Fatal(err)
	}
	publishKeyed(t, b, topic, keys, 0, perKey)
	testutil.CheckFor(t, 10*time.Second, func() error {
		if n := k.held("a"); n != len(keys) {
			return fmt.Errorf("a holds %d keys, want %d", n, len(keys))
		}
		return nil
	})
	if _, err := b.Subscribe(t.Context(), topic, group, k.handler(t, "b", work), opts); err != nil {
		t.Fatal(err)
	}
}

// TestOrderedTakeOverAfterCrash: the hub pulling an ordered group dies
// with keys held (its connection drops, nothing is handed back). The other
// hub takes over once the pin times out (3.6 s), before the held events'
// leases end (5 s): it holds those keys, while their newer events arrive,
// until the held ones are redelivered and settled.
func TestOrderedTakeOverAfterCrash(t *testing.T) {
	srv := natstest.RunEmbedded(t)
	a, nca := hubOn(t, srv)
	b, _ := hubOn(t, srv)
	const topic, group = "ord.crash", "g"
	keys := []string{"k0", "k1", "k2", "k3"}
	k := newKeyTracker()
	opts := facade.SubscribeOptions{OrderBy: facade.OrderByKey, AckTimeoutMs: 5000, MaxInFlight: 32}
	// a holds every event until it crashes.
	hold := func(ctx context.Context, _ string, _ int) bool { <-ctx.Done(); return false }
	pinToA(t, a, b, topic, group, keys, 2, k, hold, opts)
	k.crash("a")
	crashed := time.Now()
	nca.Close()
	// Newer events reach b as soon as it takes over.
	publishKeyed(t, b, topic, keys, 2, 4)
	k.waitDone(t, keys, 4)
	if took := time.Since(crashed); took < 4*time.Second {
		t.Fatalf("b finished %v after the crash, before the held events' leases ended", took)
	}
}

// TestOrderedLostPinWhileRunning: the hub pulling an ordered group loses
// its pin while its handlers run (here the group is unpinned by hand, as
// the pin times out when a hub stops pulling for long), and goes on with
// the events it had fetched until its next pull tells it. The hub that
// takes over holds those keys, while their newer events reach it, until
// the fence lifts.
func TestOrderedLostPinWhileRunning(t *testing.T) {
	srv := natstest.RunEmbedded(t)
	a, _ := hubOn(t, srv)
	b, _ := hubOn(t, srv)
	const topic, group = "ord.unpin", "g"
	keys := []string{"k0", "k1", "k2", "k3"}
	k := newKeyTracker()
	opts := facade.SubscribeOptions{OrderBy: facade.OrderByKey, AckTimeoutMs: 2000, MaxInFlight: 32}
	// a holds its first events until release, then takes 300 ms each.
	release := make(chan struct{})
	hold := func(ctx context.Context, _ string, _ int) bool {
		select {
		case <-release:
		case <-ctx.Done():
			return false
		}
		select {
		case <-time.After(300 * time.Millisecond):
			return true
		case <-ctx.Done():
			return false
		}
	}
	pinToA(t, a, b, topic, group, keys, 3, k, hold, opts)
	ctx := t.Context()
	g, err := a.Admin().Group(ctx, topic, group)
	if err != nil {
		t.Fatal(err)
	}
	js, err := njs.New(natstest.InProcessConn(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	name, err := js.StreamNameBySubject(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.UnpinConsumer(ctx, g.Consumer, "eventhub"); err != nil {
		t.Fatal(err)
	}
	// The next events go to b, which now pulls; those of k0..k3 must wait
	// while a runs the keys' earlier ones.
	publishKeyed(t, b, topic, []string{"z"}, 0, 1)
	k.waitDone(t, []string{"z"}, 1)
	publishKeyed(t, b, topic, keys, 3, 4)
	close(release)
	k.waitDone(t, keys, 4)
}
