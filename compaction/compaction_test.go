package compaction_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/compaction"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
)

func TestMain(m *testing.M) {
	os.Exit(testutil.RunCheckingLeaks(m, 10*time.Second, testutil.LeakMarkers...))
}

var topics = jetstream.Config{Topics: []jetstream.TopicConfig{
	{Pattern: "process.state"}, // full history
	{Pattern: "process.state.snapshot", Compaction: true},
}}

func newBus(t testing.TB, srv *server.Server) *jetstream.Bus {
	t.Helper()
	b, err := jetstream.New(natstest.InProcessConn(t, srv), topics)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func streamState(t testing.TB, b *jetstream.Bus, topic string) njs.StreamState {
	t.Helper()
	name, err := b.JetStream().StreamNameBySubject(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.JetStream().Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State
}

func latest(t testing.TB, b *jetstream.Bus, topic string) map[string]*facade.EventRecord {
	t.Helper()
	out := map[string]*facade.EventRecord{}
	if _, err := b.Latest(t.Context(), topic, func(e *facade.EventRecord) error {
		out[e.Key] = e
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCompactorBurstAndRestart: a burst of updates, the compactor stopped in
// the middle of it and started again (on a new connection, as a restarted
// hub would): the snapshot ends up equal to the source's newest event per
// key, every keyed event was stored in the snapshot exactly once, and the
// restarted compactor did not start over.
func TestCompactorBurstAndRestart(t *testing.T) {
	const keys, versions = 200, 15
	srv := natstest.RunEmbedded(t)
	app := newBus(t, srv)
	cfg := compaction.Config{Source: "process.state"}

	bus1 := newBus(t, srv)
	c1, err := compaction.Start(t.Context(), bus1, cfg)
	if err != nil {
		t.Fatal(err)
	}

	// The burst: keyed updates, with an unkeyed event now and then.
	var wg sync.WaitGroup
	pubErr := make(chan error, 1)
	wg.Go(func() {
		ctx := context.Background()
		for v := range versions {
			for k := range keys {
				p, _ := json.Marshal(map[string]int{"k": k, "v": v})
				opts := facade.PublishOptions{
					Key: fmt.Sprintf("host:proc:%d", k), Headers: map[string]string{"v": fmt.Sprint(v)},
					Tags: []string{"burst"}, SID: "s1",
				}
				if _, err := app.Publish(ctx, "process.state", p, opts); err != nil {
					pubErr <- err
					return
				}
			}
			if _, err := app.Publish(ctx, "process.state", json.RawMessage(`"unkeyed"`), facade.PublishOptions{}); err != nil {
				pubErr <- err
				return
			}
		}
		pubErr <- nil
	})

	// Stop the compactor in the middle of the burst.
	testutil.CheckFor(t, 30*time.Second, func() error {
		if n := c1.Stats().Republished; n < keys*versions/3 {
			return fmt.Errorf("%d republished", n)
		}
		return nil
	})
	if err := c1.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := bus1.Close(); err != nil {
		t.Fatal(err)
	}
	first := c1.Stats()
	if first.Republished >= keys*versions {
		t.Fatalf("the compactor finished before it was stopped (%d): the test did not stop it mid-burst", first.Republished)
	}

	c2, err := compaction.Start(t.Context(), newBus(t, srv), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	wg.Wait()
	if err := <-pubErr; err != nil {
		t.Fatal(err)
	}
	source := streamState(t, app, "process.state")
	testutil.CheckFor(t, 30*time.Second, func() error {
		if s := c2.Stats(); s.LastSourceSeq != source.LastSeq {
			return fmt.Errorf("compactor at source seq %d of %d", s.LastSourceSeq, source.LastSeq)
		}
		return nil
	})
	second := c2.Stats()
	t.Logf("first run republished %d, second %d (of %d keyed events)", first.Republished, second.Republished, keys*versions)
	if second.Republished >= keys*versions || first.Republished+second.Republished > keys*versions+1 {
		t.Fatalf("republished %d + %d of %d: the restarted compactor reprocessed history", first.Republished, second.Republished, keys*versions)
	}
	if second.Skipped == 0 {
		t.Fatal("unkeyed events were not skipped")
	}

	snap := streamState(t, app, "process.state.snapshot")
	if snap.Msgs != keys {
		t.Fatalf("snapshot holds %d messages, want %d", snap.Msgs, keys)
	}
	if snap.LastSeq != keys*versions {
		t.Fatalf("snapshot stored %d events, want each of the %d keyed events once", snap.LastSeq, keys*versions)
	}
	src, dst := latest(t, app, "process.state"), latest(t, app, "process.state.snapshot")
	if len(src) != keys || len(dst) != keys {
		t.Fatalf("%d source keys, %d snapshot keys, want %d", len(src), len(dst), keys)
	}
	for k, s := range src {
		d := dst[k]
		if d == nil {
			t.Fatalf("key %s missing from the snapshot", k)
		}
		if string(d.Payload) != string(s.Payload) || d.TS != s.TS || d.SID != s.SID ||
			d.Headers["v"] != s.Headers["v"] || len(d.Tags) != 1 || d.Topic != "process.state.snapshot" {
			t.Fatalf("key %s: snapshot %+v, source %+v", k, d, s)
		}
		if d.ID != compaction.SnapshotID("process.state.snapshot", s.ID, s.TS) {
			t.Fatalf("key %s: snapshot id %s not derived from %s", k, d.ID, s.ID)
		}
	}

	// Live: the next update reaches the snapshot.
	if _, err := app.Publish(t.Context(), "process.state", json.RawMessage(`{"k":0,"v":99}`), facade.PublishOptions{Key: "host:proc:0"}); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		m, err := app.LatestByKey(t.Context(), "process.state.snapshot", []string{"host:proc:0"})
		if err != nil {
			return err
		}
		if e := m["host:proc:0"]; e == nil || string(e.Payload) != `{"k":0,"v":99}` {
			return fmt.Errorf("snapshot of host:proc:0: %+v", e)
		}
		return nil
	})
}

func TestCompactorNeedsCompactedSnapshot(t *testing.T) {
	srv := natstest.RunEmbedded(t)
	b, err := jetstream.New(natstest.InProcessConn(t, srv), jetstream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = compaction.Start(t.Context(), b, compaction.Config{Source: "orders.state"})
	if !errors.Is(err, facade.ErrNotCompacted) {
		t.Fatalf("start with a snapshot topic that keeps every event: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     compaction.Config
		wantErr error
	}{
		{"ok", compaction.Config{Source: "a.b"}, nil},
		{"explicit", compaction.Config{Source: "a.b", Snapshot: "snap.a", Group: "g1"}, nil},
		{"no source", compaction.Config{}, compaction.ErrInvalidConfig},
		{"bad source", compaction.Config{Source: "a..b"}, facade.ErrBadTopic},
		{"same topic", compaction.Config{Source: "a", Snapshot: "a"}, compaction.ErrInvalidConfig},
		{"bad group", compaction.Config{Source: "a", Group: "has space"}, facade.ErrBadGroup},
	}
	for _, tc := range tests {
		err := tc.cfg.Validate()
		if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.wantErr)
		}
	}
}

func TestSnapshotID(t *testing.T) {
	src := facade.NewID()
	a := compaction.SnapshotID("x.snapshot", src, 0)
	if a != compaction.SnapshotID("x.snapshot", src, 123) {
		t.Fatal("not deterministic")
	}
	if a == compaction.SnapshotID("y.snapshot", src, 0) || a == compaction.SnapshotID("x.snapshot", facade.NewID(), 0) || a == src {
		t.Fatal("ids collide")
	}
	u, err := uuid.Parse(a)
	if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 {
		t.Fatalf("%s is not a uuidv7: %v", a, err)
	}
	st, _ := facade.IDTime(src)
	at, _ := facade.IDTime(a)
	if !st.Equal(at) {
		t.Fatalf("snapshot id time %v, source %v", at, st)
	}
	// A source id that is not a uuidv7 takes its time from ts.
	b := compaction.SnapshotID("x.snapshot", "order-17", 1_700_000_000_123)
	if bt, ok := facade.IDTime(b); !ok || bt.UnixMilli() != 1_700_000_000_123 {
		t.Fatalf("time of %s: %v", b, bt)
	}
}

// TestCompactorDeletesKeys: a key deleted in the source (a tombstone) is
// deleted from the snapshot too, and written again after it, comes back.
func TestCompactorDeletesKeys(t *testing.T) {
	srv := natstest.RunEmbedded(t)
	app := newBus(t, srv)
	c, err := compaction.Start(t.Context(), newBus(t, srv), compaction.Config{Source: "process.state"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	pub := func(key, payload string) {
		t.Helper()
		if _, err := app.Publish(t.Context(), "process.state", json.RawMessage(payload), facade.PublishOptions{Key: key}); err != nil {
			t.Fatal(err)
		}
	}
	pub("a", `{"v":1}`)
	pub("b", `{"v":1}`)
	del, err := app.DeleteKey(t.Context(), "process.state", "a", facade.DeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		if got := c.Stats().LastSourceSeq; got < del.Seq {
			return fmt.Errorf("compactor at source seq %d, want %d", got, del.Seq)
		}
		return nil
	})
	snap := latest(t, app, "process.state.snapshot")
	if _, ok := snap["a"]; ok || len(snap) != 1 || snap["b"] == nil {
		t.Fatalf("snapshot after deleting a: %v, want only b", snap)
	}
	got, err := app.LatestByKey(t.Context(), "process.state.snapshot", []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["a"]; ok {
		t.Fatalf("latest-by-key of the snapshot still has a: %v", got["a"])
	}
	pub("a", `{"v":2}`)
	testutil.CheckFor(t, 10*time.Second, func() error {
		if e := latest(t, app, "process.state.snapshot")["a"]; e == nil || string(e.Payload) != `{"v":2}` {
			return fmt.Errorf("snapshot of a: %v", e)
		}
		return nil
	})
}

// TestCompactorExpiredKey: on a source topic with delete markers, a key
// whose event expires is deleted from the snapshot too.
func TestCompactorExpiredKey(t *testing.T) {
	srv := natstest.RunEmbedded(t)
	cfg := jetstream.Config{Topics: []jetstream.TopicConfig{
		{Pattern: "presence", DeleteMarkerTTL: time.Second},
		{Pattern: "presence.snapshot", Compaction: true},
	}}
	app, err := jetstream.New(natstest.InProcessConn(t, srv), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Close() })
	c, err := compaction.Start(t.Context(), app, compaction.Config{Source: "presence"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	for _, o := range []facade.PublishOptions{{Key: "gone", TTLSeconds: 2}, {Key: "stays"}} {
		if _, err := app.Publish(t.Context(), "presence", json.RawMessage(`{"status":"alive"}`), o); err != nil {
			t.Fatal(err)
		}
	}
	want := func(present bool) func() error {
		return func() error {
			snap := latest(t, app, "presence.snapshot")
			if (snap["gone"] != nil) != present || snap["stays"] == nil {
				return fmt.Errorf("snapshot %v: want gone present %v, stays", snap, present)
			}
			return nil
		}
	}
	testutil.CheckFor(t, 10*time.Second, want(true))  // copied
	testutil.CheckFor(t, 15*time.Second, want(false)) // deleted once it expired
}
