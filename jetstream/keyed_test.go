package jetstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
)

// versioned is the payload of the keyed tests: key number and version.
type versioned struct {
	K int `json:"k"`
	V int `json:"v"`
}

func decodeV(t testing.TB, e *facade.EventRecord) versioned {
	t.Helper()
	var v versioned
	if err := json.Unmarshal(e.Payload, &v); err != nil {
		t.Fatalf("payload %s: %v", e.Payload, err)
	}
	return v
}

func keyName(i int) string { return fmt.Sprintf("host-%d:proc:%d", i%7, i) }

// publishVersions publishes versions from..to (inclusive) of keys 0..nkeys-1,
// round-robin, pipelined, and waits for every ack.
func publishVersions(t testing.TB, b *jetstream.Bus, topic string, nkeys, from, to int) {
	t.Helper()
	ctx := t.Context()
	for v := from; v <= to; v++ {
		for k := range nkeys {
			p, _ := json.Marshal(versioned{k, v})
			publishAsync(t, ctx, b, topic, p, keyName(k))
		}
	}
	select {
	case <-b.JetStream().PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		t.Fatal("async publishes not acknowledged")
	}
}

// publishAsync is a pipelined publish that waits and tries again when nats.go
// gave up waiting for room in its window (ErrTooManyStalledMsgs after 200 ms,
// which a loaded machine reaches).
func publishAsync(t testing.TB, ctx context.Context, b *jetstream.Bus, topic string, payload []byte, key string) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		_, err := b.PublishAsync(ctx, topic, payload, facade.PublishOptions{Key: key})
		if err == nil {
			return
		}
		if !errors.Is(err, njs.ErrTooManyStalledMsgs) || attempt == 20 {
			t.Fatalf("publish: %v", err)
		}
		<-b.JetStream().PublishAsyncComplete()
	}
}

func streamOf(t testing.TB, b *jetstream.Bus, topic string) njs.Stream {
	t.Helper()
	name, err := b.JetStream().StreamNameBySubject(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.JetStream().Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func scan(t testing.TB, b *jetstream.Bus, topic string) (map[string]*facade.EventRecord, uint64) {
	t.Helper()
	out := map[string]*facade.EventRecord{}
	var last uint64
	n, err := b.Latest(t.Context(), topic, func(e *facade.EventRecord) error {
		if _, dup := out[e.Key]; dup {
			return fmt.Errorf("key %q twice", e.Key)
		}
		if e.Seq <= last {
			return fmt.Errorf("seq %d after %d: not in stream order", e.Seq, last)
		}
		last = e.Seq
		out[e.Key] = e
		return nil
	})
	if err != nil {
		t.Fatalf("Latest(%s): %v", topic, err)
	}
	if last > n {
		t.Fatalf("Latest returned seq %d beyond its upToSeq %d", last, n)
	}
	return out, n
}

// TestCompaction100k: 100,000 updates over 1,000 keys leave exactly 1,000
// messages, and LatestByKey and Latest return the newest of each.
func TestCompaction100k(t *testing.T) {
	const keys, versions = 1000, 100
	b, _ := newBus(t, jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "kv.big", Compaction: true}}})
	start := time.Now()
	publishVersions(t, b, "kv.big", keys, 1, versions)
	t.Logf("%d updates published in %v", keys*versions, time.Since(start).Round(time.Millisecond))
	s := streamOf(t, b, "kv.big")
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != keys || info.State.LastSeq != keys*versions {
		t.Fatalf("compacted stream holds %d messages (last seq %d), want %d (%d)", info.State.Msgs, info.State.LastSeq, keys, keys*versions)
	}
	all := make([]string, keys)
	for i := range all {
		all[i] = keyName(i)
	}
	latest, err := b.LatestByKey(t.Context(), "kv.big", all)
	if err != nil {
		t.Fatal(err)
	}
	if len(latest) != keys {
		t.Fatalf("LatestByKey returned %d keys, want %d", len(latest), keys)
	}
	for i, k := range all {
		e := latest[k]
		if v := decodeV(t, e); e.Key != k || v.K != i || v.V != versions {
			t.Fatalf("latest of %q: key %q payload %s", k, e.Key, e.Payload)
		}
	}
	got, n := scan(t, b, "kv.big")
	if n != keys*versions || len(got) != keys {
		t.Fatalf("Latest: %d keys up to %d, want %d up to %d", len(got), n, keys, keys*versions)
	}
	for _, k := range all {
		if v := decodeV(t, got[k]); v.V != versions {
			t.Fatalf("Latest of %q: %s", k, got[k].Payload)
		}
	}
}

// oddKeys need escaping in a subject token, or look like subject syntax.
var oddKeys = []string{
	"host:name:1234", "a.b.c", "path/to/thing", "with space", "tab\tand\nnewline",
	"ünïcødé ✓", "日本語", "%41", "100%", "*", ">", "a>b*c", "back\\slash", "..",
}

func TestOddKeysRoundTrip(t *testing.T) {
	// Not compacted: a subscriber lagging behind the publisher would miss
	// round 0 events replaced by round 1 (compaction working as intended).
	b, _ := newBus(t, jetstream.Config{})
	got := make(chan *facade.EventRecord, 2*len(oddKeys))
	unsub, err := b.Subscribe(t.Context(), "odd.keys", "g", func(_ context.Context, dl facade.Delivery) error {
		e := dl.Event()
		got <- e
		return nil
	}, facade.SubscribeOptions{MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub.Stop(context.Background())
	for round := range 2 {
		for i, k := range oddKeys {
			pub(t, b, "odd.keys", fmt.Sprintf(`{"k":%d,"v":%d}`, i, round), k)
		}
	}
	for i := range 2 * len(oddKeys) {
		select {
		case e := <-got:
			if want := oddKeys[i%len(oddKeys)]; e.Key != want || e.Topic != "odd.keys" {
				t.Fatalf("delivery %d: key %q topic %q, want %q", i, e.Key, e.Topic, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("delivery %d missing", i)
		}
	}
	check := func(how string, m map[string]*facade.EventRecord) {
		t.Helper()
		if len(m) != len(oddKeys) {
			t.Fatalf("%s: %d keys, want %d", how, len(m), len(oddKeys))
		}
		for i, k := range oddKeys {
			e := m[k]
			if e == nil {
				t.Fatalf("%s: key %q missing", how, k)
			}
			if v := decodeV(t, e); e.Key != k || v.K != i || v.V != 1 {
				t.Fatalf("%s: key %q: %q %s", how, k, e.Key, e.Payload)
			}
		}
	}
	few, err := b.LatestByKey(t.Context(), "odd.keys", oddKeys[:2]) // one get per key
	if err != nil || len(few) != 2 || few[oddKeys[1]].Key != oddKeys[1] {
		t.Fatalf("LatestByKey of 2 keys: %v %v", few, err)
	}
	m, err := b.LatestByKey(t.Context(), "odd.keys", append(slices.Clone(oddKeys), "missing", oddKeys[0]))
	if err != nil {
		t.Fatal(err)
	}
	check("LatestByKey", m)
	m, _ = scan(t, b, "odd.keys")
	check("Latest", m)
	m = map[string]*facade.EventRecord{}
	unsnap, err := b.SubscribeSnapshot(t.Context(), "odd.keys", func(_ context.Context, e *facade.EventRecord, d facade.SnapshotDelivery) error {
		if d.Live {
			return errors.New("unexpected live event")
		}
		m[e.Key] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check("SubscribeSnapshot", m)
	if err := unsnap.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestChildTopicsBothCompacted: a topic and its child topic, both compacted
// and keyed, have separate streams and separate keys.
func TestChildTopicsBothCompacted(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{Topics: []jetstream.TopicConfig{
		{Pattern: "process.state", Compaction: true},
		{Pattern: "process.state.snapshot", Compaction: true},
	}})
	for v := range 3 {
		pub(t, b, "process.state", fmt.Sprintf(`{"k":1,"v":%d}`, v), "h:n:1")
		pub(t, b, "process.state", fmt.Sprintf(`{"k":2,"v":%d}`, v), "h:n:2")
		pub(t, b, "process.state.snapshot", fmt.Sprintf(`{"k":1,"v":%d}`, 10+v), "h:n:1")
	}
	for topic, want := range map[string]map[string]int{
		"process.state":          {"h:n:1": 2, "h:n:2": 2},
		"process.state.snapshot": {"h:n:1": 12},
	} {
		if c, err := b.TopicCompacted(t.Context(), topic); err != nil || !c {
			t.Fatalf("%s compacted %v, %v", topic, c, err)
		}
		info, err := streamOf(t, b, topic).Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != uint64(len(want)) {
			t.Fatalf("%s holds %d messages, want %d", topic, info.State.Msgs, len(want))
		}
		got, _ := scan(t, b, topic)
		if len(got) != len(want) {
			t.Fatalf("%s: Latest has %d keys, want %d", topic, len(got), len(want))
		}
		for k, v := range want {
			if e := got[k]; e == nil || e.Topic != topic || decodeV(t, e).V != v {
				t.Fatalf("%s key %s: %+v", topic, k, e)
			}
		}
	}
	if a, b := streamOf(t, b, "process.state").CachedInfo().Config.Name, streamOf(t, b, "process.state.snapshot").CachedInfo().Config.Name; a == b {
		t.Fatalf("parent and child share stream %s", a)
	}
}

// TestCompactedSurvivesRestart restarts the embedded server on the same
// store: the compacted state is still there.
func TestCompactedSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "kv.restart", Compaction: true}}}
	open := func() (*jetstream.Bus, func()) {
		srv := natstest.RunEmbeddedIn(t, dir, -1)
		b, err := jetstream.New(natstest.InProcessConn(t, srv), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b, func() {
			_ = b.Close()
			srv.Shutdown()
			srv.WaitForShutdown()
		}
	}
	b, stop := open()
	publishVersions(t, b, "kv.restart", 50, 1, 20)
	stop()

	b, stop = open()
	defer stop()
	info, err := streamOf(t, b, "kv.restart").Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 50 {
		t.Fatalf("after restart the compacted stream holds %d messages, want 50", info.State.Msgs)
	}
	got, n := scan(t, b, "kv.restart")
	if len(got) != 50 || n != 50*20 {
		t.Fatalf("after restart: %d keys up to %d", len(got), n)
	}
	for k, e := range got {
		if decodeV(t, e).V != 20 {
			t.Fatalf("key %s: %s", k, e.Payload)
		}
	}
	one, err := b.LatestByKey(t.Context(), "kv.restart", []string{keyName(7)})
	if err != nil || decodeV(t, one[keyName(7)]).V != 20 {
		t.Fatalf("LatestByKey after restart: %v %v", one, err)
	}
	// Still compacted: new updates replace.
	publishVersions(t, b, "kv.restart", 50, 21, 21)
	if info, _ := streamOf(t, b, "kv.restart").Info(t.Context()); info.State.Msgs != 50 {
		t.Fatalf("after restart and updates: %d messages", info.State.Msgs)
	}
}

// TestLatestBeyondMultiLastLimit: more keys than one multi_last request may
// match (1024), on a compacted and on a full-history topic, while updates
// are published concurrently.
func TestLatestBeyondMultiLastLimit(t *testing.T) {
	for _, compacted := range []bool{true, false} {
		t.Run(fmt.Sprintf("compacted=%v", compacted), func(t *testing.T) {
			const keys = 1500
			b, _ := newBus(t, jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "kv.many", Compaction: compacted}}})
			publishVersions(t, b, "kv.many", keys, 1, 2)
			// Concurrent updates of the first keys while Latest runs.
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for v := 3; ; v++ {
					select {
					case <-stop:
						return
					default:
					}
					p, _ := json.Marshal(versioned{v % 10, v})
					_, _ = b.Publish(context.Background(), "kv.many", p, facade.PublishOptions{Key: keyName(v % 10)})
				}
			})
			got, n := scan(t, b, "kv.many")
			close(stop)
			wg.Wait()
			// Keys 10.. were not updated: all of them, at version 2. Keys
			// 0..9 may be missing if they were updated after n.
			for i := 10; i < keys; i++ {
				e := got[keyName(i)]
				if e == nil || decodeV(t, e).V != 2 || e.Seq > n {
					t.Fatalf("key %d: %+v (upTo %d)", i, e, n)
				}
			}
			for i := range 10 {
				if e := got[keyName(i)]; e != nil && e.Seq > n {
					t.Fatalf("key %d at seq %d beyond upTo %d", i, e.Seq, n)
				}
			}
			if len(got) < keys-10 || len(got) > keys {
				t.Fatalf("%d keys", len(got))
			}
		})
	}
}

// TestWarmStart publishes updates while a snapshot subscriber starts: it
// sees each key's newest event once, then every later update, in order,
// without duplicates or gaps.
func TestWarmStart(t *testing.T) {
	for _, tc := range []struct {
		keys      int
		compacted bool
	}{{40, false}, {40, true}, {1100, false}, {1100, true}} {
		t.Run(fmt.Sprintf("keys=%d/compacted=%v", tc.keys, tc.compacted), func(t *testing.T) {
			t.Parallel()
			testWarmStart(t, tc.keys, tc.compacted)
		})
	}
}

type delivery struct {
	seq  uint64
	key  string
	v    int
	live bool
}

func testWarmStart(t *testing.T, keys int, compacted bool) {
	const topic = "ws.state"
	b, _ := newBus(t, jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: topic, Compaction: compacted}}})
	publishVersions(t, b, topic, keys, 1, 2)

	// The publisher runs through the start of the subscription.
	var published atomic.Int64
	lastV := make([]int, keys)
	for i := range lastV {
		lastV[i] = 2
	}
	stop := make(chan struct{})
	pubErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		hot := min(keys, 40) // the keys that keep changing
		for v := 3; ; v++ {
			for k := range hot {
				select {
				case <-stop:
					pubErr <- nil
					return
				default:
				}
				p, _ := json.Marshal(versioned{k, v})
				if _, err := b.Publish(context.Background(), topic, p, facade.PublishOptions{Key: keyName(k)}); err != nil {
					pubErr <- err
					return
				}
				lastV[k] = v
				published.Add(1)
			}
		}
	})
	testutil.CheckFor(t, 20*time.Second, func() error {
		if published.Load() < 50 {
			return errors.New("publisher not going yet")
		}
		return nil
	})

	var mu sync.Mutex
	var got []delivery
	var upTo uint64
	unsub, err := b.SubscribeSnapshot(t.Context(), topic, func(_ context.Context, e *facade.EventRecord, d facade.SnapshotDelivery) error {
		var v versioned
		if err := json.Unmarshal(e.Payload, &v); err != nil {
			return err
		}
		mu.Lock()
		got = append(got, delivery{e.Seq, e.Key, v.V, d.Live})
		upTo = d.UpToSeq
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub.Stop(context.Background())
	at := published.Load()
	testutil.CheckFor(t, 20*time.Second, func() error {
		if published.Load() < at+100 {
			return errors.New("publisher did not go on after the subscription started")
		}
		return nil
	})
	close(stop)
	wg.Wait()
	if err := <-pubErr; err != nil {
		t.Fatal(err)
	}
	// Every key reaches its final version.
	testutil.CheckFor(t, 20*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		final := map[string]int{}
		for _, d := range got {
			final[d.key] = d.v
		}
		for k := range keys {
			if final[keyName(k)] != lastV[k] {
				return fmt.Errorf("key %d at version %d, want %d", k, final[keyName(k)], lastV[k])
			}
		}
		return nil
	})
	if err := unsub.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()

	inSnapshot := map[string]bool{}
	versions := map[string][]int{}
	var prev uint64
	live, snap := 0, 0
	for i, d := range got {
		if d.seq <= prev {
			t.Fatalf("delivery %d: seq %d after %d (duplicate or out of order)", i, d.seq, prev)
		}
		prev = d.seq
		if !d.live {
			snap++
			if live > 0 {
				t.Fatalf("snapshot event %d after a live event", i)
			}
			if inSnapshot[d.key] {
				t.Fatalf("key %s twice in the snapshot", d.key)
			}
			inSnapshot[d.key] = true
			if d.seq > upTo {
				t.Fatalf("snapshot event at %d beyond upTo %d", d.seq, upTo)
			}
		} else {
			live++
			if d.seq <= upTo {
				t.Fatalf("live event at %d not after upTo %d", d.seq, upTo)
			}
		}
		versions[d.key] = append(versions[d.key], d.v)
	}
	t.Logf("%d snapshot events up to %d, then %d live", snap, upTo, live)
	if live == 0 {
		t.Fatal("no live event: the test did not overlap publishing with the start")
	}
	for k, vs := range versions {
		if !slices.IsSorted(vs) || len(slices.Compact(slices.Clone(vs))) != len(vs) {
			t.Fatalf("key %s versions %v not strictly increasing", k, vs)
		}
		if !compacted && keys <= 1024 {
			// Full history and an exact snapshot: versions are consecutive
			// from the snapshot on (no gap).
			for i := 1; i < len(vs); i++ {
				if vs[i] != vs[i-1]+1 {
					t.Fatalf("key %s versions %v: gap", k, vs)
				}
			}
		}
	}
	if !compacted {
		// Every event after upTo arrived live: they are upTo+1..last.
		info, err := streamOf(t, b, topic).Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if uint64(live) != info.State.LastSeq-upTo {
			t.Fatalf("%d live events, want %d (upTo %d, last %d)", live, info.State.LastSeq-upTo, upTo, info.State.LastSeq)
		}
	}
	if !compacted && keys <= 1024 && snap != keys {
		t.Fatalf("snapshot holds %d keys, want %d", snap, keys)
	}
}

func TestSnapshotHandlerErrorStops(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{})
	pub(t, b, "snap.err", `{"v":1}`, "a")
	boom := errors.New("boom")
	calls := make(chan bool, 10)
	unsub, err := b.SubscribeSnapshot(t.Context(), "snap.err", func(_ context.Context, e *facade.EventRecord, d facade.SnapshotDelivery) error {
		calls <- d.Live
		if d.Live {
			return boom
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if live := <-calls; live {
		t.Fatal("first call is live")
	}
	pub(t, b, "snap.err", `{"v":2}`, "a")
	pub(t, b, "snap.err", `{"v":3}`, "a")
	if live := <-calls; !live {
		t.Fatal("second call is not live")
	}
	select {
	case <-unsub.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a handler error did not end the subscription")
	}
	if err := unsub.Err(); !errors.Is(err, boom) {
		t.Fatalf("Err %v, want the handler's error", err)
	}
	if err := unsub.Stop(t.Context()); err != nil {
		t.Fatalf("Stop after the handler's error: %v", err)
	}
	if len(calls) != 0 {
		t.Fatal("handler called after it failed")
	}
	// A failure during the snapshot is SubscribeSnapshot's error.
	_, err = b.SubscribeSnapshot(t.Context(), "snap.err", func(context.Context, *facade.EventRecord, facade.SnapshotDelivery) error {
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("snapshot failure: %v", err)
	}
	// An unkeyed-only stream cannot be subscribed with a snapshot.
	js := b.JetStream()
	if _, err := js.CreateStream(t.Context(), njs.StreamConfig{Name: "PLAIN", Subjects: []string{"plain.only"}, Storage: njs.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SubscribeSnapshot(t.Context(), "plain.only", func(context.Context, *facade.EventRecord, facade.SnapshotDelivery) error { return nil }); !errors.Is(err, facade.ErrBadKey) {
		t.Fatalf("snapshot of a stream without keyed subjects: %v", err)
	}
}

// TestSnapshotStopsWithBus: closing the bus ends snapshot subscriptions
// (TestMain checks nothing is left running).
func TestSnapshotStopsWithBus(t *testing.T) {
	srv := natstest.RunEmbedded(t)
	b, err := jetstream.New(natstest.InProcessConn(t, srv), jetstream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	unsub, err := b.SubscribeSnapshot(t.Context(), "snap.close", func(context.Context, *facade.EventRecord, facade.SnapshotDelivery) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a snapshot subscription: %v", err)
	}
	if err := unsub.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := unsub.Err(); !errors.Is(err, facade.ErrClosed) {
		t.Fatalf("Err after the bus closed: %v, want ErrClosed", err)
	}
	if _, err := b.SubscribeSnapshot(t.Context(), "snap.close", func(context.Context, *facade.EventRecord, facade.SnapshotDelivery) error { return nil }); !errors.Is(err, facade.ErrClosed) {
		t.Fatalf("subscribe on a closed bus: %v", err)
	}
}

// TestPlainClientKeys: a plain nats.go client publishes a keyed event on the
// documented subject and reads a key's newest event by subject.
func TestPlainClientKeys(t *testing.T) {
	srv := natstest.RunEmbedded(t)
	b, err := jetstream.New(natstest.InProcessConn(t, srv), jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "process.state", Compaction: true}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pub(t, b, "process.state", `{"status":"alive"}`, "host:name:1234")
	last := pub(t, b, "process.state", `{"status":"stale"}`, "host:name:1234")
	srvConn := natstest.InProcessConn(t, srv) // a plain client of its own
	js, err := njs.New(srvConn)
	if err != nil {
		t.Fatal(err)
	}
	name, err := js.StreamNameBySubject(t.Context(), "process.state._k.host:name:1234")
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(t.Context(), "process.state._k.host:name:1234")
	if err != nil {
		t.Fatal(err)
	}
	// The event's id is derived from its time and position.
	if string(m.Data) != `{"status":"stale"}` || m.Header.Get(jetstream.HeaderID) != "" ||
		jetstream.PosID("process.state", last.TS, m.Sequence) != last.ID {
		t.Fatalf("plain read: %s %v (event %s)", m.Data, m.Header, last.ID)
	}
	// The bare direct-get request, as any client can send it.
	resp, err := srvConn.Request("$JS.API.DIRECT.GET."+name+".process.state._k.host:name:1234", nil, 5*time.Second)
	if err != nil || string(resp.Data) != `{"status":"stale"}` {
		t.Fatalf("direct get: %v %v", resp, err)
	}
	// A plain publish on an escaped key is an event with that key.
	key := "web 01:nginx:80"
	if _, err := js.Publish(t.Context(), "process.state._k."+jetstream.EncodeKey(key), []byte(`{"status":"alive"}`)); err != nil {
		t.Fatal(err)
	}
	got, err := b.LatestByKey(t.Context(), "process.state", []string{key})
	if err != nil || got[key] == nil || string(got[key].Payload) != `{"status":"alive"}` || got[key].Key != key {
		t.Fatalf("plain keyed publish read back: %+v %v", got[key], err)
	}
}

// TestLatestPagesLargeAnswers: answers beyond one batched direct get
// response (4 MiB) come in pages, still one event per key.
func TestLatestPagesLargeAnswers(t *testing.T) {
	const keys = 500
	b, _ := newBus(t, jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "kv.large", Compaction: true}}})
	big := make([]byte, 12<<10)
	for i := range big {
		big[i] = 'x'
	}
	for v := range 2 {
		for k := range keys {
			p := fmt.Appendf(nil, `{"k":%d,"v":%d,"pad":"%s"}`, k, v, big)
			publishAsync(t, t.Context(), b, "kv.large", p, keyName(k))
		}
	}
	<-b.JetStream().PublishAsyncComplete()
	got, _ := scan(t, b, "kv.large")
	all := make([]string, keys)
	for i := range all {
		all[i] = keyName(i)
	}
	m, err := b.LatestByKey(t.Context(), "kv.large", all)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != keys || len(m) != keys {
		t.Fatalf("Latest %d keys, LatestByKey %d, want %d", len(got), len(m), keys)
	}
	for _, k := range all {
		if decodeV(t, got[k]).V != 1 || decodeV(t, m[k]).V != 1 {
			t.Fatalf("key %s: %d / %d", k, decodeV(t, got[k]).V, decodeV(t, m[k]).V)
		}
	}
}

// TestKeysWithoutDirectGet: an operator-made compacted stream without
// allow_direct still serves LatestByKey, Latest and SubscribeSnapshot.
func TestKeysWithoutDirectGet(t *testing.T) {
	b, nc := newBus(t, jetstream.Config{})
	js, _ := njs.New(nc)
	if _, err := js.CreateStream(t.Context(), njs.StreamConfig{
		Name: "OPKV", Subjects: []string{"opkv.>"}, MaxMsgsPerSubject: 1, Storage: njs.MemoryStorage,
	}); err != nil {
		t.Fatal(err)
	}
	for v := range 3 {
		for k := range 20 {
			pub(t, b, "opkv.state", fmt.Sprintf(`{"k":%d,"v":%d}`, k, v), keyName(k))
		}
	}
	if c, err := b.TopicCompacted(t.Context(), "opkv.state"); err != nil || !c {
		t.Fatalf("compacted %v %v", c, err)
	}
	keys := make([]string, 20)
	for i := range keys {
		keys[i] = keyName(i)
	}
	m, err := b.LatestByKey(t.Context(), "opkv.state", keys)
	if err != nil || len(m) != 20 || decodeV(t, m[keyName(3)]).V != 2 {
		t.Fatalf("LatestByKey: %d keys, %v", len(m), err)
	}
	got, _ := scan(t, b, "opkv.state")
	if len(got) != 20 || decodeV(t, got[keyName(5)]).V != 2 {
		t.Fatalf("Latest: %d keys", len(got))
	}
	var mu sync.Mutex
	snap, live := 0, make(chan int, 1)
	unsub, err := b.SubscribeSnapshot(t.Context(), "opkv.state", func(_ context.Context, e *facade.EventRecord, d facade.SnapshotDelivery) error {
		if !d.Live {
			mu.Lock()
			snap++
			mu.Unlock()
			return nil
		}
		var v versioned
		_ = json.Unmarshal(e.Payload, &v)
		live <- v.V
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub.Stop(context.Background())
	pub(t, b, "opkv.state", `{"k":0,"v":3}`, keyName(0))
	if v := <-live; v != 3 {
		t.Fatalf("live %d", v)
	}
	mu.Lock()
	defer mu.Unlock()
	if snap != 20 {
		t.Fatalf("snapshot of %d keys", snap)
	}
}
