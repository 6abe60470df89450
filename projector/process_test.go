package projector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/projector"
)

func TestMain(m *testing.M) {
	os.Exit(testutil.RunCheckingLeaks(m, 10*time.Second, testutil.LeakMarkers...))
}

// busConfig is the topic configuration the projector requires.
var busConfig = jetstream.Config{Topics: []jetstream.TopicConfig{
	{Pattern: projector.DefaultStates, Compaction: true},
}}

func newBus(t testing.TB, srv *server.Server) *jetstream.Bus {
	t.Helper()
	b, err := jetstream.New(natstest.InProcessConn(t, srv), busConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func heartbeat(t testing.TB, b facade.Publisher, name string, pid int, cpu float64) *facade.EventRecord {
	t.Helper()
	e, err := facade.PublishJSON(t.Context(), b, projector.DefaultHeartbeats,
		projector.Heartbeat{PID: pid, Name: name, Host: "h", CPUPct: cpu, MemMB: 100}, facade.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// stateOf returns the stored state of a process and the sequence of its
// event.
func stateOf(t testing.TB, b facade.KeyReader, name string, pid int) (*projector.ProcessState, uint64) {
	t.Helper()
	st, e := stateEvent(t, b, name, pid)
	if e == nil {
		return nil, 0
	}
	return st, e.Seq
}

// stateEvent returns the stored state of a process and its event.
func stateEvent(t testing.TB, b facade.KeyReader, name string, pid int) (*projector.ProcessState, *facade.EventRecord) {
	t.Helper()
	key := projector.ProcessID("h", name, pid)
	m, err := b.LatestByKey(t.Context(), projector.DefaultStates, []string{key})
	if err != nil && !errors.Is(err, facade.ErrNotFound) {
		t.Fatal(err)
	}
	e := m[key]
	if e == nil {
		return nil, nil
	}
	var st projector.ProcessState
	if err := json.Unmarshal(e.Payload, &st); err != nil {
		t.Fatal(err)
	}
	return &st, e
}

func waitStatus(t testing.TB, b facade.KeyReader, name string, pid int, want projector.Status) *projector.ProcessState {
	t.Helper()
	var st *projector.ProcessState
	testutil.CheckFor(t, 15*time.Second, func() error {
		st, _ = stateOf(t, b, name, pid)
		if st == nil || st.Status != want {
			return fmt.Errorf("%s: %+v, want %s", name, st, want)
		}
		return nil
	})
	return st
}

// statesPublished is how many state events were ever stored.
func statesPublished(t testing.TB, b *jetstream.Bus) uint64 {
	t.Helper()
	name, err := b.JetStream().StreamNameBySubject(t.Context(), projector.DefaultStates)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.JetStream().Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.LastSeq
}

// waitChecks waits until p has run n more staleness checks.
func waitChecks(t testing.TB, p *projector.Projector, n uint64) {
	t.Helper()
	from := p.Stats().Checks
	testutil.CheckFor(t, 15*time.Second, func() error {
		if c := p.Stats().Checks; c < from+n {
			return fmt.Errorf("%d checks", c-from)
		}
		return nil
	})
}

func TestStaleAndAliveAgain(t *testing.T) {
	b := newBus(t, natstest.RunEmbedded(t))
	p, err := projector.Start(t.Context(), b, projector.Config{
		StaleAfter: 500 * time.Millisecond, CheckEvery: 30 * time.Millisecond, MinInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	hb := heartbeat(t, b, "stt", 1234, 10)
	st := waitStatus(t, b, "stt", 1234, projector.StatusAlive)
	if st.ProcessID != "h:stt:1234" || st.LastSeenTS != hb.TS || st.CPUPct != 10 || st.PID != 1234 {
		t.Fatalf("alive state %+v", st)
	}
	st = waitStatus(t, b, "stt", 1234, projector.StatusStale)
	if st.LastSeenTS != hb.TS {
		t.Fatalf("stale state last seen %d, want the heartbeat's %d", st.LastSeenTS, hb.TS)
	}
	if _, e := stateEvent(t, b, "stt", 1234); e.TS-hb.TS < 500 {
		t.Fatalf("marked stale %d ms after the heartbeat, before StaleAfter", e.TS-hb.TS)
	}
	if n := statesPublished(t, b); n != 2 {
		t.Fatalf("%d states published, want 2 (alive, stale)", n)
	}

	// Nothing changes: nothing is published, check after check.
	waitChecks(t, p, 10)
	if n := statesPublished(t, b); n != 2 {
		t.Fatalf("%d states published while nothing changed", n)
	}

	// Alive again, once.
	hb2 := heartbeat(t, b, "stt", 1234, 20)
	st = waitStatus(t, b, "stt", 1234, projector.StatusAlive)
	if st.LastSeenTS != hb2.TS || st.CPUPct != 20 {
		t.Fatalf("alive again: %+v", st)
	}
	// A replayed older heartbeat changes nothing; a newer one with other
	// metrics is held back by MinInterval.
	if _, err := facade.PublishJSON(t.Context(), b, projector.DefaultHeartbeats,
		projector.Heartbeat{PID: 1234, Name: "stt", Host: "h", CPUPct: 99, MemMB: 1}, facade.PublishOptions{TS: hb.TS}); err != nil {
		t.Fatal(err)
	}
	heartbeat(t, b, "stt", 1234, 30)
	// A payload that is not a heartbeat is skipped without blocking.
	if _, err := b.Publish(t.Context(), projector.DefaultHeartbeats, json.RawMessage(`{"nope":1}`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		if s := p.Stats(); s.Heartbeats != 4 || s.Invalid != 1 {
			return fmt.Errorf("stats %+v", s)
		}
		return nil
	})
	waitChecks(t, p, 3)
	if n := statesPublished(t, b); n != 3 {
		t.Fatalf("%d states published, want 3 (alive, stale, alive)", n)
	}
	if st, _ := stateOf(t, b, "stt", 1234); st.CPUPct != 20 || st.Status != projector.StatusAlive {
		t.Fatalf("state %+v", st)
	}
}

// TestDocumentedHeartbeatShapes: a heartbeat as the protocol's examples
// publish it (the process in the key, the metrics in the payload) is
// projected; one that names no process is skipped with a log line that says
// what is missing.
func TestDocumentedHeartbeatShapes(t *testing.T) {
	b := newBus(t, natstest.RunEmbedded(t))
	var logs testutil.Buffer
	p, err := projector.Start(t.Context(), b, projector.Config{
		StaleAfter: time.Minute, MinInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := b.Publish(t.Context(), projector.DefaultHeartbeats, json.RawMessage(`{"pid":1234,"cpu_pct":12.5}`),
		facade.PublishOptions{Key: "h:stt:1234"}); err != nil {
		t.Fatal(err)
	}
	if st := waitStatus(t, b, "stt", 1234, projector.StatusAlive); st.Host != "h" || st.CPUPct != 12.5 {
		t.Fatalf("state %+v", st)
	}
	if _, err := b.Publish(t.Context(), projector.DefaultHeartbeats, json.RawMessage(`{"pid":1234,"name":"stt"}`),
		facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		if !strings.Contains(logs.String(), "heartbeat skipped") {
			return fmt.Errorf("no log of the skipped heartbeat:\n%s", logs.String())
		}
		return nil
	})
	if out := logs.String(); strings.Contains(out, "err=<nil>") || !strings.Contains(out, "no host in the payload or the key") {
		t.Fatalf("the skipped heartbeat's log does not say what is missing:\n%s", out)
	}
	if s := p.Stats(); s.Heartbeats != 1 || s.Invalid != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestParseHeartbeat(t *testing.T) {
	for _, tc := range []struct {
		payload, key string
		want         projector.Heartbeat
		missing      string
	}{
		{payload: `{"pid":7,"name":"api","host":"a","cpu_pct":1}`, want: projector.Heartbeat{PID: 7, Name: "api", Host: "a", CPUPct: 1}},
		{payload: `{"cpu_pct":2}`, key: "a:api:7", want: projector.Heartbeat{PID: 7, Name: "api", Host: "a", CPUPct: 2}},
		{payload: `{"pid":7}`, key: "fe80::1:api:7", want: projector.Heartbeat{PID: 7, Name: "api", Host: "fe80::1"}},
		{payload: `{"pid":7,"name":"api"}`, missing: "no host in"},
		{payload: `{}`, key: "a:api:x", missing: "no host, name, pid (a positive number) in"},
		{payload: `[1]`, missing: "payload"},
	} {
		hb, err := projector.ParseHeartbeat(&facade.EventRecord{Payload: json.RawMessage(tc.payload), Key: tc.key})
		switch {
		case tc.missing != "":
			if !errors.Is(err, projector.ErrNotHeartbeat) || !strings.Contains(err.Error(), tc.missing) {
				t.Errorf("%s key %q: %v, want ErrNotHeartbeat naming %q", tc.payload, tc.key, err, tc.missing)
			}
		case err != nil || hb != tc.want:
			t.Errorf("%s key %q: %+v, %v; want %+v", tc.payload, tc.key, hb, err, tc.want)
		}
	}
}

// TestMinInterval: metric changes are published at most once per MinInterval,
// and the newest values make it out.
func TestMinInterval(t *testing.T) {
	b := newBus(t, natstest.RunEmbedded(t))
	const minInterval = 250 * time.Millisecond
	p, err := projector.Start(t.Context(), b, projector.Config{
		StaleAfter: time.Minute, CheckEvery: 20 * time.Millisecond, MinInterval: minInterval,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	start := time.Now()
	var last float64
	for i := 1; time.Since(start) < time.Second; i++ {
		last = float64(i)
		heartbeat(t, b, "tts", 7, last)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		if st, _ := stateOf(t, b, "tts", 7); st == nil || st.CPUPct != last {
			return fmt.Errorf("state %+v, want cpu %v", st, last)
		}
		return nil
	})
	elapsed := time.Since(start)
	n := statesPublished(t, b)
	hbs := p.Stats().Heartbeats
	limit := uint64(elapsed/minInterval) + 2
	t.Logf("%d heartbeats in %v gave %d states (limit %d)", hbs, elapsed.Round(time.Millisecond), n, limit)
	if n > limit {
		t.Fatalf("%d states published in %v, more than one per %v", n, elapsed, minInterval)
	}
	if hbs < 2*n {
		t.Fatalf("only %d heartbeats for %d states: the test did not exercise the limit", hbs, n)
	}
}

// TestProjectorSurvivesRestart stops the projector and the bus (and the NATS
// server), starts them again on the same store: stale stays stale, alive stays
// alive, nothing unchanged is republished, a process that stopped before the
// restart goes stale after it, and a stale process comes back.
func TestProjectorSurvivesRestart(t *testing.T) {
	const staleAfter = time.Second
	cfg := projector.Config{StaleAfter: staleAfter, CheckEvery: 30 * time.Millisecond, MinInterval: time.Hour}
	dir := t.TempDir()
	start := func() (*server.Server, *jetstream.Bus, *projector.Projector) {
		srv := natstest.RunEmbeddedIn(t, dir, -1)
		b := newBus(t, srv)
		p, err := projector.Start(t.Context(), b, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return srv, b, p
	}
	// b keeps heartbeating until stopped.
	keepAlive := func(bus *jetstream.Bus) (stop func()) {
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			for {
				_, _ = facade.PublishJSON(context.Background(), bus, projector.DefaultHeartbeats,
					projector.Heartbeat{PID: 2, Name: "b", Host: "h", CPUPct: 5, MemMB: 100}, facade.PublishOptions{})
				select {
				case <-done:
					return
				case <-t.C:
				}
			}
		})
		return func() { close(done); wg.Wait() }
	}

	srv, b, p := start()
	heartbeat(t, b, "a", 1, 1)
	heartbeat(t, b, "c", 3, 3)
	stopB := keepAlive(b)
	waitStatus(t, b, "a", 1, projector.StatusAlive)
	waitStatus(t, b, "b", 2, projector.StatusAlive)
	// c stays alive while it heartbeats; a goes stale.
	testutil.CheckFor(t, 15*time.Second, func() error {
		heartbeat(t, b, "c", 3, 3)
		if st, _ := stateOf(t, b, "a", 1); st == nil || st.Status != projector.StatusStale {
			return errors.New("a not stale yet")
		}
		return nil
	})
	heartbeat(t, b, "c", 3, 3)
	if st, _ := stateOf(t, b, "c", 3); st.Status != projector.StatusAlive {
		t.Fatalf("c: %+v", st)
	}
	_, seqA := stateOf(t, b, "a", 1)
	_, seqB := stateOf(t, b, "b", 2)
	before := statesPublished(t, b)
	if before != 4 {
		t.Fatalf("%d states before the restart, want 4 (a, b, c alive; a stale)", before)
	}

	// Restart everything on the same store.
	stopB()
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	restarted := time.Now()
	srv, b, p = start()
	defer p.Close()
	stopB = keepAlive(b)
	defer stopB()
	if r := p.Stats().Rebuilt; r != 3 {
		t.Fatalf("rebuilt %d processes, want 3", r)
	}

	// c heartbeats no more: stale, StaleAfter after the restart at the
	// earliest (its stored last_seen_ts may be older than its last heartbeat).
	st := waitStatus(t, b, "c", 3, projector.StatusStale)
	_, ec := stateEvent(t, b, "c", 3)
	seqC := ec.Seq
	if early := ec.Time().Sub(restarted); early < staleAfter {
		t.Fatalf("c marked stale %v after the restart, before StaleAfter", early)
	}
	if st.LastSeenTS == 0 {
		t.Fatalf("c: %+v", st)
	}
	// b went on heartbeating: still alive and never republished; a untouched.
	waitChecks(t, p, 5)
	if st, seq := stateOf(t, b, "b", 2); st.Status != projector.StatusAlive || seq != seqB {
		t.Fatalf("b after the restart: %+v at %d (was at %d)", st, seq, seqB)
	}
	if st, seq := stateOf(t, b, "a", 1); st.Status != projector.StatusStale || seq != seqA {
		t.Fatalf("a after the restart: %+v at %d (was at %d)", st, seq, seqA)
	}
	// a comes back.
	hb := heartbeat(t, b, "a", 1, 11)
	st = waitStatus(t, b, "a", 1, projector.StatusAlive)
	if st.LastSeenTS != hb.TS || st.CPUPct != 11 {
		t.Fatalf("a back: %+v", st)
	}
	waitChecks(t, p, 3)
	if n := statesPublished(t, b); n != before+2 {
		t.Fatalf("%d states published after the restart, want 2 (c stale, a alive)", n-before)
	}
	if _, seq := stateOf(t, b, "c", 3); seq != seqC {
		t.Fatal("c republished")
	}
	_ = srv
}

func TestProjectorNeedsCompactedStates(t *testing.T) {
	srv := natstest.RunEmbedded(t)
	b, err := jetstream.New(natstest.InProcessConn(t, srv), jetstream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := projector.Start(t.Context(), b, projector.Config{}); !errors.Is(err, facade.ErrNotCompacted) {
		t.Fatalf("start on a states topic that keeps every event: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     projector.Config
		wantErr error
	}{
		{"zero", projector.Config{}, nil},
		{"same topics", projector.Config{Heartbeats: "x", States: "x"}, projector.ErrInvalidConfig},
		{"bad topic", projector.Config{States: "_x"}, facade.ErrBadTopic},
		{"bad group", projector.Config{Group: "a b"}, facade.ErrBadGroup},
		{"negative", projector.Config{StaleAfter: -1}, projector.ErrInvalidConfig},
	}
	for _, tc := range tests {
		err := tc.cfg.Validate()
		if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.wantErr)
		}
	}
}

// TestDemo runs the demo publisher with the projector: the flaky process
// goes stale and comes back; the others stay alive.
func TestDemo(t *testing.T) {
	b := newBus(t, natstest.RunEmbedded(t))
	p, err := projector.Start(t.Context(), b, projector.Config{
		StaleAfter: 300 * time.Millisecond, CheckEvery: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- projector.Demo(ctx, b, projector.DemoConfig{
			Host: "h", Every: 25 * time.Millisecond, RunFor: 300 * time.Millisecond, PauseFor: 700 * time.Millisecond,
		})
	}()
	waitStatus(t, b, "stt", 4101, projector.StatusAlive)
	waitStatus(t, b, "stt", 4101, projector.StatusStale)
	waitStatus(t, b, "stt", 4101, projector.StatusAlive)
	if st, _ := stateOf(t, b, "llm", 4103); st == nil || st.Status != projector.StatusAlive {
		t.Fatalf("llm: %+v", st)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
