package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/outbox"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     outbox.Config
		wantErr error
	}{
		{"zero", outbox.Config{}, nil},
		{"batch too big", outbox.Config{BatchSize: 10_001}, outbox.ErrInvalidConfig},
		{"negative batch", outbox.Config{BatchSize: -1}, outbox.ErrInvalidConfig},
		{"tiny lease", outbox.Config{Lease: time.Millisecond}, outbox.ErrInvalidConfig},
		{"negative poll", outbox.Config{PollInterval: -1}, outbox.ErrInvalidConfig},
		{"negative attempts", outbox.Config{MaxAttempts: -1}, outbox.ErrInvalidConfig},
		{"max below base", outbox.Config{BackoffBase: time.Second, BackoffMax: time.Millisecond}, outbox.ErrInvalidConfig},
		{"long worker id", outbox.Config{WorkerID: strings.Repeat("w", 201)}, outbox.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Validate = %v, want %v", err, tt.wantErr)
			}
		})
	}
	c := outbox.Config{}.WithDefaults()
	if c.BatchSize != 100 || c.Lease != 30*time.Second || c.PollInterval != 250*time.Millisecond ||
		c.MaxAttempts != 10 || c.Retention != 24*time.Hour || c.WorkerID == "" || c.Logger == nil {
		t.Fatalf("defaults %+v", c)
	}
	if a, b := (outbox.Config{}).WithDefaults().WorkerID, (outbox.Config{}).WithDefaults().WorkerID; a == b {
		t.Fatalf("default worker ids are equal: %s", a)
	}
	// The default horizon needs more than the streams' default 2 minute
	// duplicate window: the docs say to raise it to 5 minutes.
	if h := (outbox.Config{}).RetryHorizon(); h < 2*time.Minute || h > 5*time.Minute {
		t.Fatalf("default RetryHorizon %v", h)
	}
	if h := (outbox.Config{MaxAttempts: 1, Lease: time.Second, Timeout: time.Second}).RetryHorizon(); h != 2*time.Second {
		t.Fatalf("RetryHorizon with one attempt = %v, want 2s", h)
	}
}

// A committed transaction yields exactly one event, a rolled-back one none;
// the event carries the record's id, key, headers, payload and creation time.
func TestCommitPublishesRollbackDoesNot(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend, dsn string) {
		ctx := t.Context()
		s := openStore(t, dsn)
		bus := newBus(t)
		if _, err := s.DB().ExecContext(ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		insertOrder := `INSERT INTO orders (id, total) VALUES ($1, $2)`
		if be.name == "sqlite" {
			insertOrder = `INSERT INTO orders (id, total) VALUES (?1, ?2)`
		}
		write := func(order int, commit bool) string {
			tx, err := s.DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, insertOrder, order, 100*order); err != nil {
				t.Fatal(err)
			}
			id, err := s.Add(ctx, tx, outbox.Record{Topic: "orders.created", Key: fmt.Sprintf("order:%d", order),
				Payload: json.RawMessage(fmt.Sprintf(`{"order":%d}`, order)), Headers: map[string]string{"source": "test"}})
			if err != nil {
				t.Fatal(err)
			}
			if commit {
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			return id
		}
		committed := write(1, true)
		rolledBack := write(2, false)

		d := newDrainer(t, s, bus, fastConfig(t, "w1"))
		runDrainer(t, d)
		waitSent(t, s, 10*time.Second, 1)

		if _, err := s.Get(ctx, rolledBack); !errors.Is(err, outbox.ErrNotFound) {
			t.Fatalf("rolled-back record: %v", err)
		}
		var orders int
		if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM orders`).Scan(&orders); err != nil || orders != 1 {
			t.Fatalf("orders = %d, %v", orders, err)
		}
		msgs := readStream(t, bus, "orders.created")
		if len(msgs) != 1 || msgs[0].id != committed {
			t.Fatalf("stream holds %d messages (%+v), want only %s", len(msgs), msgs, committed)
		}
		e, err := s.Get(ctx, committed)
		if err != nil {
			t.Fatal(err)
		}
		m := msgs[0]
		if string(m.data) != `{"order":1}` || m.subject != "orders.created._k.order:1" ||
			!strings.Contains(m.header.Get(jetstream.HeaderHeaders), `"source":"test"`) ||
			m.header.Get(jetstream.HeaderTS) != fmt.Sprint(e.CreatedAt.UnixMilli()) {
			t.Fatalf("message %+v %s; entry created %v", m, m.data, e.CreatedAt)
		}
		if e.Status != outbox.StatusSent || e.ClaimedBy != "w1" || e.SentAt.IsZero() {
			t.Fatalf("entry %+v", e)
		}
		waitStats(t, d, func(st outbox.Stats) bool { return st.Sent == 1 && st.Claimed == 1 && st.Errored == 0 })
	})
}

// A drainer that dies after publishing and before marking sent leaves the
// claim behind; after its lease, another drainer publishes the record again
// and JetStream's duplicate window keeps the stream at one copy.
func TestCrashAfterPublishBeforeMarkSent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend, dsn string) {
		ctx := t.Context()
		bus := newBus(t)
		setup := openStore(t, dsn)
		ids := addN(t, setup, "crash.test", 5)

		// Drainer A, on its own *sql.DB: right after the first successful
		// publish, its database goes away and it is stopped — nothing it
		// does afterwards reaches the table, as if the process died.
		storeA, err := outbox.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		var crashedSeq atomic.Uint64
		var crashedID atomic.Value
		var dA *outbox.Drainer
		pubA := &recordingPublisher{inner: bus}
		pubA.after = func(e *facade.EventRecord) {
			if crashedID.Load() != nil {
				return
			}
			crashedID.Store(e.ID)
			crashedSeq.Store(e.Seq)
			storeA.DB().Close()
			go dA.Close() // Close waits for Run, which is calling us
		}
		cfgA := fastConfig(t, "A")
		cfgA.Lease = 400 * time.Millisecond
		cfgA.BatchSize = 1
		dA = newDrainer(t, storeA, pubA, cfgA)
		errA := make(chan error, 1)
		go func() { errA <- dA.Run(ctx) }()
		select {
		case err := <-errA:
			if err != nil {
				t.Fatalf("Run A: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("drainer A did not stop")
		}
		id, _ := crashedID.Load().(string)
		if id != ids[0] {
			t.Fatalf("A published %q first, want %s", id, ids[0])
		}
		// The event is in the stream but the record is still claimed by A.
		if msgs := readStream(t, bus, "crash.test"); len(msgs) != 1 || msgs[0].id != id {
			t.Fatalf("after the crash the stream holds %+v", msgs)
		}
		checkEntry(t, setup, id, outbox.StatusClaimed, 1, "")

		// Drainer B takes over once A's lease expired.
		var dupSeq atomic.Uint64
		pubB := &recordingPublisher{inner: bus, after: func(e *facade.EventRecord) {
			if e.ID == id {
				dupSeq.Store(e.Seq)
			}
		}}
		storeB := openStore(t, dsn)
		cfgB := fastConfig(t, "B")
		cfgB.Lease = 2 * time.Second // requeue checks every Lease/4
		dB := newDrainer(t, storeB, pubB, cfgB)
		runDrainer(t, dB)
		waitSent(t, setup, 20*time.Second, len(ids))

		if pubB.callsOf(id) != 1 || dupSeq.Load() != crashedSeq.Load() {
			t.Fatalf("B published the crashed record %d times, seq %d (original %d)", pubB.callsOf(id), dupSeq.Load(), crashedSeq.Load())
		}
		e := checkEntry(t, setup, id, outbox.StatusSent, 2, "lease of A expired")
		if e.ClaimedBy != "B" {
			t.Fatalf("sent by %q", e.ClaimedBy)
		}
		if st := dB.Stats(); st.Requeued != 1 {
			t.Fatalf("B stats %+v", st)
		}
		checkStreamExactlyOnce(t, bus, "crash.test", ids)
	})
}

// A publish that reaches the stream but whose acknowledgement is lost fails
// the attempt; the retry is deduplicated by the id.
func TestLostAckIsRetriedWithoutDuplicate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend, dsn string) {
		bus := newBus(t)
		s := openStore(t, dsn)
		ids := addN(t, s, "lost.ack", 20)
		var mu sync.Mutex
		failed := map[string]bool{}
		pub := &recordingPublisher{inner: publishFunc(func(ctx context.Context, topic string, payload json.RawMessage, opts facade.PublishOptions) (*facade.EventRecord, error) {
			e, err := bus.Publish(ctx, topic, payload, opts)
			mu.Lock()
			defer mu.Unlock()
			if err == nil && !failed[opts.ID] {
				failed[opts.ID] = true // stored, but we say it failed
				return nil, errors.New("connection reset while reading the ack")
			}
			return e, err
		})}
		d := newDrainer(t, s, pub, fastConfig(t, "w"))
		runDrainer(t, d)
		waitSent(t, s, 20*time.Second, len(ids))
		// Each record is published at least twice (more if the machine
		// stalls past a lease), and the stream holds it once.
		for _, id := range ids {
			if pub.callsOf(id) < 2 {
				t.Fatalf("%s published %d times, want 2 or more", id, pub.callsOf(id))
			}
		}
		e := checkEntry(t, s, ids[0], outbox.StatusSent, mustAttempts(t, s, ids[0]), "connection reset while reading the ack")
		if e.Attempts < 2 {
			t.Fatalf("attempts %d", e.Attempts)
		}
		waitStats(t, d, func(st outbox.Stats) bool { return st.Retried >= uint64(len(ids)) && st.Sent == uint64(len(ids)) })
		checkStreamExactlyOnce(t, bus, "lost.ack", ids)
	})
}

type publishFunc func(ctx context.Context, topic string, payload json.RawMessage, opts facade.PublishOptions) (*facade.EventRecord, error)

func (f publishFunc) Publish(ctx context.Context, topic string, payload json.RawMessage, opts facade.PublishOptions) (*facade.EventRecord, error) {
	return f(ctx, topic, payload, opts)
}

// Three drainers, each with its own *sql.DB, drain one table while a writer
// adds to it: every record is published exactly once and marked sent.
func TestThreeDrainersShareTheWork(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend, dsn string) {
		n := 10_000
		if be.name == "sqlite" && raceEnabled {
			n = 4_000 // SQLite under the race detector drains ~600 records/s
		}
		if testing.Short() {
			n = 2_000
		}
		bus := newBus(t)
		s := openStore(t, dsn)
		var drainers []*outbox.Drainer
		for i := range 3 {
			cfg := fastConfig(t, fmt.Sprintf("d%d", i))
			cfg.Sequential = i == 2 // one of them publishes without pipelining
			cfg.Lease = 30 * time.Second
			d := newDrainer(t, openStore(t, dsn), bus, cfg)
			drainers = append(drainers, d)
			runDrainer(t, d)
		}
		start := time.Now()
		ids := addN(t, s, "three.drainers", n)
		waitSent(t, s, 60*time.Second, n)
		t.Logf("%d records added and drained in %v", n, time.Since(start))

		// The counts can trail the rows by a moment (see waitStats). A lease
		// lost under load (a drainer too slow to settle before its lease ran
		// out) is allowed: the record is then marked by the drainer that took
		// it over, and its id keeps the stream free of a copy.
		testutil.CheckFor(t, 10*time.Second, func() error {
			var sent uint64
			for _, d := range drainers {
				sent += d.Stats().Sent
			}
			if sent != uint64(n) {
				return fmt.Errorf("drainers marked %d sent, want %d", sent, n)
			}
			return nil
		})
		for i, d := range drainers {
			st := d.Stats()
			t.Logf("drainer %d: %+v", i, st)
			if st.Errored != 0 || st.Retried != 0 {
				t.Errorf("drainer %d: %+v", i, st)
			}
		}
		st, err := s.Stats(t.Context())
		if err != nil || st.Pending != 0 || st.Claimed != 0 || st.Failed != 0 || !st.OldestUnsent.IsZero() {
			t.Fatalf("store stats %+v, %v", st, err)
		}
		checkStreamExactlyOnce(t, bus, "three.drainers", ids)
	})
}

// A poison record ends as error with its reason and does not hold up the
// others: at once for an error retrying cannot fix, after MaxAttempts for
// one it might.
func TestPoisonRecords(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend, dsn string) {
		ctx := t.Context()
		bus, err := jetstream.Open(ctx, jetstream.OpenConfig{
			Server: jetstream.ServerConfig{DataDir: t.TempDir(), Port: -1},
			Bus:    jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "poison.compacted", Compaction: true}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bus.Close() })
		s := openStore(t, dsn)

		good1 := addN(t, s, "poison.good", 3)
		badTopic := facade.NewID()
		insertRaw(t, s, badTopic, "bad topic!", `{"x":1}`) // Add would refuse it
		noKey := add(t, s, outbox.Record{Topic: "poison.compacted", Payload: json.RawMessage(`1`)})
		flaky := add(t, s, outbox.Record{Topic: "poison.flaky", Payload: json.RawMessage(`2`)})
		good2 := addN(t, s, "poison.good", 3)

		var fixed atomic.Bool
		pub := &recordingPublisher{inner: bus, before: func(ctx context.Context, topic string, opts facade.PublishOptions) error {
			if topic == "poison.flaky" && !fixed.Load() {
				return errors.New("downstream says no")
			}
			return nil
		}}
		cfg := fastConfig(t, "w")
		cfg.MaxAttempts = 3
		cfg.BatchSize = 4
		d := newDrainer(t, s, pub, cfg)
		runDrainer(t, d)

		waitSent(t, s, 20*time.Second, 6)
		testutil.CheckFor(t, 20*time.Second, func() error {
			if n := countStatus(t, s, outbox.StatusError); n != 3 {
				return fmt.Errorf("%d parked, want 3", n)
			}
			return nil
		})
		e := checkEntry(t, s, badTopic, outbox.StatusError, 1, mustLastErr(t, s, badTopic))
		if !strings.Contains(e.LastErr, "bad_topic") {
			t.Errorf("bad topic parked with %q", e.LastErr)
		}
		e = checkEntry(t, s, noKey, outbox.StatusError, 1, mustLastErr(t, s, noKey))
		if !strings.Contains(e.LastErr, "key_required") {
			t.Errorf("compacted topic without key parked with %q", e.LastErr)
		}
		e = checkEntry(t, s, flaky, outbox.StatusError, 3, mustLastErr(t, s, flaky))
		if !strings.Contains(e.LastErr, "gave up after 3 attempts") || !strings.Contains(e.LastErr, "downstream says no") {
			t.Errorf("flaky parked with %q", e.LastErr)
		}
		if pub.callsOf(badTopic) != 1 || pub.callsOf(noKey) != 1 || pub.callsOf(flaky) != 3 {
			t.Errorf("publish calls: bad topic %d, no key %d, flaky %d; want 1, 1, 3",
				pub.callsOf(badTopic), pub.callsOf(noKey), pub.callsOf(flaky))
		}
		waitStats(t, d, func(st outbox.Stats) bool { return st.Errored == 3 && st.Retried == 2 && st.Sent == 6 })
		if st, _ := s.Stats(ctx); st.Failed != 3 || st.Pending != 0 {
			t.Errorf("store stats %+v", st)
		}
		checkStreamExactlyOnce(t, bus, "poison.good", append(good1, good2...))

		// An operator fixes the cause and retries the flaky record.
		fixed.Store(true)
		if n, err := s.RetryFailed(ctx, flaky); err != nil || n != 1 {
			t.Fatalf("RetryFailed: %d, %v", n, err)
		}
		d.Notify()
		waitSent(t, s, 20*time.Second, 7)
	})
}

func mustAttempts(t testing.TB, s *outbox.Store, id string) int {
	t.Helper()
	e, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e.Attempts
}

func mustLastErr(t testing.TB, s *outbox.Store, id string) string {
	t.Helper()
	e, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e.LastErr
}

// Failures that say the event store is unavailable are not attempts: a
// record that meets more of them than MaxAttempts is still delivered.
func TestUnavailableIsNotCountedAsAttempt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend, dsn string) {
		bus := newBus(t)
		s := openStore(t, dsn)
		id := add(t, s, outbox.Record{Topic: "unavail.rec", Payload: json.RawMessage(`1`)})
		var calls atomic.Int32
		pub := &recordingPublisher{inner: bus, before: func(ctx context.Context, topic string, opts facade.PublishOptions) error {
			if calls.Add(1) <= 5 {
				return fmt.Errorf("publish %s: %w", topic, facade.ErrUnavailable)
			}
			return nil
		}}
		cfg := fastConfig(t, "w")
		cfg.MaxAttempts = 2
		d := newDrainer(t, s, pub, cfg)
		runDrainer(t, d)
		waitSent(t, s, 20*time.Second, 1)
		checkEntry(t, s, id, outbox.StatusSent, 1, "event store unavailable: publish unavail.rec: unavailable: event store unavailable")
		if st := d.Stats(); st.Deferred != 5 || st.Retried != 0 || st.Errored != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// A claim stuck with a worker that stopped (process paused or dead) goes to
// another drainer once its lease expires; the stuck worker can no longer
// settle it.
func TestLeaseExpiryHandsStuckClaimToAnotherDrainer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend, dsn string) {
		ctx := t.Context()
		bus := newBus(t)
		s := openStore(t, dsn)
		ids := addN(t, s, "lease.expiry", 8)
		stuck, err := openStore(t, dsn).Claim(ctx, "stuck", 5, 300*time.Millisecond)
		if err != nil || len(stuck) != 5 {
			t.Fatalf("claim: %d, %v", len(stuck), err)
		}
		cfg := fastConfig(t, "rescuer")
		cfg.Lease = time.Second // requeue checks every Lease/4
		d := newDrainer(t, s, bus, cfg)
		runDrainer(t, d)
		waitSent(t, s, 20*time.Second, len(ids))
		for _, e := range stuck {
			got := checkEntry(t, s, e.ID, outbox.StatusSent, 2, "lease of stuck expired")
			if got.ClaimedBy != "rescuer" {
				t.Fatalf("%s sent by %q", e.ID, got.ClaimedBy)
			}
		}
		if n, err := s.MarkSent(ctx, stuck...); err != nil || n != 0 {
			t.Fatalf("stuck worker marked %d sent, %v", n, err)
		}
		if err := s.MarkError(ctx, stuck[0], "late"); !errors.Is(err, outbox.ErrLeaseLost) {
			t.Fatalf("stuck MarkError: %v", err)
		}
		if st := d.Stats(); st.Requeued != 5 {
			t.Fatalf("stats %+v", st)
		}
		checkStreamExactlyOnce(t, bus, "lease.expiry", ids)
	})
}

// Records are published oldest first.
func TestOrderOldestFirst(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend, dsn string) {
		bus := newBus(t)
		s := openStore(t, dsn)
		ids := addN(t, s, "order.test", 25)
		cfg := fastConfig(t, "w")
		cfg.BatchSize = 4
		d := newDrainer(t, s, bus, cfg)
		runDrainer(t, d)
		waitSent(t, s, 20*time.Second, len(ids))
		msgs := readStream(t, bus, "order.test")
		var got []string
		for _, m := range msgs {
			got = append(got, m.id)
		}
		if fmt.Sprint(got) != fmt.Sprint(ids) {
			t.Fatalf("stream order\n%v\nwant\n%v", got, ids)
		}
	})
}

// Notify wakes a drainer that would otherwise wait out its poll interval.
func TestNotifyWakesDrainer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend, dsn string) {
		bus := newBus(t)
		s := openStore(t, dsn)
		cfg := fastConfig(t, "w")
		cfg.PollInterval = time.Hour
		d := newDrainer(t, s, bus, cfg)
		runDrainer(t, d)
		// The first record may be taken by the drainer's first claim; the
		// later ones find it asleep for an hour unless Notify wakes it.
		for i := range 3 {
			add(t, s, outbox.Record{Topic: "notify.test", Payload: json.RawMessage(`1`)})
			d.Notify()
			waitSent(t, s, 10*time.Second, i+1)
		}
	})
}

// Shutdown lets the batch in progress finish; Close abandons it and hands
// the unpublished claims back.
func TestShutdownAndClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend, dsn string) {
		ctx := t.Context()
		bus := newBus(t)

		t.Run("ShutdownFinishesBatch", func(t *testing.T) {
			s2, err := outbox.OpenConfig(ctx, dsn, outbox.StoreConfig{Table: "shutdown_outbox"})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			addN(t, s2, "shutdown.test", 12)
			gate := make(chan struct{})
			entered := make(chan struct{}, 100)
			pub := &recordingPublisher{inner: bus, before: func(ctx context.Context, topic string, opts facade.PublishOptions) error {
				entered <- struct{}{}
				<-gate
				return nil
			}}
			cfg := fastConfig(t, "w")
			cfg.BatchSize = 5
			d := newDrainer(t, s2, pub, cfg)
			errc := make(chan error, 1)
			go func() { errc <- d.Run(context.Background()) }()
			<-entered // the first batch is being published
			shut := make(chan error, 1)
			go func() {
				sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				shut <- d.Shutdown(sctx)
			}()
			// Run reports ErrClosed (not ErrRunning) once Shutdown began.
			testutil.CheckFor(t, 10*time.Second, func() error {
				if err := d.Run(ctx); !errors.Is(err, outbox.ErrClosed) {
					return fmt.Errorf("Run = %v", err)
				}
				return nil
			})
			close(gate)
			if err := <-shut; err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("Run: %v", err)
			}
			if n := countStatus(t, s2, outbox.StatusSent); n != 5 {
				t.Fatalf("%d sent, want the batch of 5", n)
			}
			if n := countStatus(t, s2, outbox.StatusPending); n != 7 {
				t.Fatalf("%d pending, want 7", n)
			}
			if err := d.Run(ctx); !errors.Is(err, outbox.ErrClosed) {
				t.Fatalf("Run after Shutdown: %v", err)
			}
			if err := d.Shutdown(ctx); err != nil {
				t.Fatalf("second Shutdown: %v", err)
			}
		})

		t.Run("CloseReleasesClaims", func(t *testing.T) {
			s, err := outbox.OpenConfig(ctx, dsn, outbox.StoreConfig{Table: "close_outbox"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			addN(t, s, "close.test", 10)
			var published atomic.Int32
			hang := make(chan struct{})
			pub := &recordingPublisher{inner: bus, before: func(ctx context.Context, topic string, opts facade.PublishOptions) error {
				if published.Load() == 2 {
					close(hang)
					<-ctx.Done() // hangs until the drainer gives up
					return ctx.Err()
				}
				published.Add(1)
				return nil
			}}
			cfg := fastConfig(t, "w")
			cfg.BatchSize = 6
			cfg.Timeout = time.Minute
			d := newDrainer(t, s, pub, cfg)
			errc := make(chan error, 1)
			go func() { errc <- d.Run(context.Background()) }()
			<-hang
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("Run: %v", err)
			}
			if n := countStatus(t, s, outbox.StatusSent); n != 2 {
				t.Fatalf("%d sent, want 2", n)
			}
			if n := countStatus(t, s, outbox.StatusClaimed); n != 0 {
				t.Fatalf("%d still claimed", n)
			}
			if n := countStatus(t, s, outbox.StatusPending); n != 8 {
				t.Fatalf("%d pending, want 8", n)
			}
			if st := d.Stats(); st.Deferred != 4 || st.Retried != 0 {
				t.Fatalf("stats %+v", st)
			}
			if err := d.Close(); err != nil { // idempotent
				t.Fatal(err)
			}
		})

		t.Run("ShutdownTimeout", func(t *testing.T) {
			s, err := outbox.OpenConfig(ctx, dsn, outbox.StoreConfig{Table: "timeout_outbox"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ids := addN(t, s, "timeout.test", 3)
			hang := make(chan struct{}, 1)
			pub := &recordingPublisher{inner: bus, before: func(ctx context.Context, topic string, opts facade.PublishOptions) error {
				hang <- struct{}{}
				<-ctx.Done()
				return ctx.Err()
			}}
			cfg := fastConfig(t, "w")
			cfg.Timeout = time.Minute
			d := newDrainer(t, s, pub, cfg)
			errc := make(chan error, 1)
			go func() { errc <- d.Run(context.Background()) }()
			<-hang
			sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			if err := d.Shutdown(sctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Shutdown = %v, want deadline exceeded", err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("Run: %v", err)
			}
			checkEntry(t, s, ids[0], outbox.StatusPending, 0, "")
		})

		t.Run("RunStopsWithContext", func(t *testing.T) {
			s, err := outbox.OpenConfig(ctx, dsn, outbox.StoreConfig{Table: "ctx_outbox"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			d := newDrainer(t, s, bus, fastConfig(t, "w"))
			rctx, cancel := context.WithCancel(ctx)
			errc := make(chan error, 1)
			go func() { errc <- d.Run(rctx) }()
			// Once a record is sent, that Run is running.
			add(t, s, outbox.Record{Topic: "ctx.test", Payload: json.RawMessage(`1`)})
			waitSent(t, s, 10*time.Second, 1)
			cancelled, cancelNow := context.WithCancel(ctx)
			cancelNow()
			if err := d.Run(cancelled); !errors.Is(err, outbox.ErrRunning) {
				t.Fatalf("second Run = %v, want ErrRunning", err)
			}
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("Run = %v, want context.Canceled", err)
			}
			d.Close()
		})
	})
}

// Sent records are deleted after Retention.
func TestRetentionDeletesSent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend, dsn string) {
		bus := newBus(t)
		s := openStore(t, dsn)
		addN(t, s, "retention.test", 30)
		cfg := fastConfig(t, "w")
		cfg.Retention = time.Millisecond
		cfg.CleanupInterval = 10 * time.Millisecond
		d := newDrainer(t, s, bus, cfg)
		runDrainer(t, d)
		testutil.CheckFor(t, 20*time.Second, func() error {
			if st := d.Stats(); st.Sent != 30 || st.Deleted != 30 {
				return fmt.Errorf("stats %+v", st)
			}
			return nil
		})
		var n int
		if err := s.DB().QueryRowContext(t.Context(), `SELECT count(*) FROM `+s.Table()).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d records left, %v", n, err)
		}
		if len(readStream(t, bus, "retention.test")) != 30 {
			t.Fatal("events missing from the stream")
		}
	})
}

// A batch larger than the publisher's window of unacknowledged async
// publishes is pipelined in windows, with no failed attempt.
func TestLargeBatchPipelined(t *testing.T) {
	ctx := t.Context()
	bus, err := jetstream.Open(ctx, jetstream.OpenConfig{
		Server: jetstream.ServerConfig{DataDir: t.TempDir(), Port: -1},
		Bus:    jetstream.Config{PublishAsyncMaxPending: 64},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bus.Close() })
	s := openStore(t, backends[0].dsn(t))
	ids := addN(t, s, "large.batch", 3000)
	cfg := fastConfig(t, "w")
	cfg.BatchSize = 2500
	d := newDrainer(t, s, bus, cfg)
	runDrainer(t, d)
	waitSent(t, s, 30*time.Second, len(ids))
	if st := d.Stats(); st.Retried != 0 || st.Deferred != 0 || st.Batches != 2 {
		t.Fatalf("stats %+v", st)
	}
	checkStreamExactlyOnce(t, bus, "large.batch", ids)
}
