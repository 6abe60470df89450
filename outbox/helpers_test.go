package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/pgtest"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/outbox"
)

// backend is a database the store conformance cases run against.
type backend struct {
	name string
	// dsn returns the DSN of a new, empty database for t.
	dsn func(t testing.TB) string
}

var backends = []backend{
	{"postgres", pgtest.Start},
	{"sqlite", func(t testing.TB) string { return "sqlite:" + filepath.Join(t.TempDir(), "outbox.db") }},
}

// forEachBackend runs f against a fresh database of every backend, in
// parallel subtests.
func forEachBackend(t *testing.T, f func(t *testing.T, be backend, dsn string)) {
	t.Helper()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			f(t, be, be.dsn(t))
		})
	}
}

// openStore opens a store (its own *sql.DB) on dsn, closed in cleanup.
func openStore(t testing.TB, dsn string) *outbox.Store {
	t.Helper()
	s, err := outbox.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newBus starts an embedded NATS server (no listener) and a bus on it.
func newBus(t testing.TB) *jetstream.Bus {
	t.Helper()
	b, err := jetstream.Open(context.Background(), jetstream.OpenConfig{
		Server: jetstream.ServerConfig{DataDir: t.TempDir(), Port: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// add writes one record in its own transaction and returns its id.
func add(t testing.TB, s *outbox.Store, rec outbox.Record) string {
	t.Helper()
	ctx := context.Background()
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	id, err := s.Add(ctx, tx, rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return id
}

// addN writes n records of topic with AddMany, in transactions of up to
// 1,000, and returns their ids in order. Payloads are {"n": i}.
func addN(t testing.TB, s *outbox.Store, topic string, n int) []string {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, 0, n)
	for len(ids) < n {
		recs := make([]outbox.Record, min(1000, n-len(ids)))
		for i := range recs {
			recs[i] = outbox.Record{Topic: topic, Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, len(ids)+i))}
		}
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.AddMany(ctx, tx, recs)
		if err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	return ids
}

// insertRaw writes a record without Add's validation, as an older version
// of a service (or a hand-written INSERT) could.
func insertRaw(t testing.TB, s *outbox.Store, id, topic, payload string) {
	t.Helper()
	var err error
	switch s.Dialect() {
	case outbox.Postgres:
		_, err = s.DB().ExecContext(t.Context(),
			`INSERT INTO `+s.Table()+` (id, topic, payload) VALUES ($1, $2, $3)`, id, topic, payload)
	case outbox.SQLite:
		now := time.Now().UnixMilli()
		_, err = s.DB().ExecContext(t.Context(),
			`INSERT INTO `+s.Table()+` (id, topic, payload, created_at, next_attempt_at) VALUES (?, ?, ?, ?, ?)`,
			id, topic, payload, now, now)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// countStatus counts the table's records with status st.
func countStatus(t testing.TB, s *outbox.Store, st outbox.Status) int {
	t.Helper()
	var n int
	q := `SELECT count(*) FROM ` + s.Table() + ` WHERE status = $1`
	if s.Dialect() == outbox.SQLite {
		q = strings.Replace(q, "$1", "?1", 1)
	}
	if err := s.DB().QueryRowContext(t.Context(), q, string(st)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// runDrainer runs d in a goroutine; cleanup closes it and checks that Run
// returned nil.
func runDrainer(t testing.TB, d *outbox.Drainer) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- d.Run(context.Background()) }()
	t.Cleanup(func() {
		d.Close()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
			errc <- err // for a test that reads it after cleanup (none do)
		case <-time.After(30 * time.Second):
			t.Errorf("Run did not return after Close")
		}
	})
	return errc
}

func newDrainer(t testing.TB, s *outbox.Store, p facade.Publisher, cfg outbox.Config) *outbox.Drainer {
	t.Helper()
	d, err := outbox.NewDrainer(s, p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// waitSent waits until every id is marked sent.
func waitSent(t testing.TB, s *outbox.Store, timeout time.Duration, want int) {
	t.Helper()
	testutil.CheckFor(t, timeout, func() error {
		if n := countStatus(t, s, outbox.StatusSent); n != want {
			return fmt.Errorf("%d records sent, want %d", n, want)
		}
		return nil
	})
}

// waitStats waits until d's counters satisfy ok. A drainer counts a batch
// just after the store commits it, so its counters can trail the rows that
// waitSent watches by a moment.
func waitStats(t testing.TB, d *outbox.Drainer, ok func(outbox.Stats) bool) {
	t.Helper()
	testutil.CheckFor(t, 10*time.Second, func() error {
		if st := d.Stats(); !ok(st) {
			return fmt.Errorf("stats %+v", st)
		}
		return nil
	})
}

// streamMsg is one message of a topic's stream.
type streamMsg struct {
	id      string
	seq     uint64
	subject string
	data    []byte
	header  nats.Header
}

// readStream returns every message of topic's stream, in stream order.
func readStream(t testing.TB, b *jetstream.Bus, topic string) []streamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	js := b.JetStream()
	name, err := js.StreamNameBySubject(ctx, topic)
	if errors.Is(err, njs.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := int(info.State.Msgs)
	if total == 0 {
		return nil
	}
	cons, err := st.OrderedConsumer(ctx, njs.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]streamMsg, 0, total)
	for len(out) < total {
		batch, err := cons.Fetch(min(total-len(out), 1000), njs.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, streamMsg{id: m.Headers().Get(nats.MsgIdHdr), seq: md.Sequence.Stream,
				subject: m.Subject(), data: m.Data(), header: m.Headers()})
			got++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, njs.ErrNoMessages) {
			t.Fatal(err)
		}
		if got == 0 {
			t.Fatalf("stream %s: read %d of %d messages, then nothing", name, len(out), total)
		}
	}
	return out
}

// checkStreamExactlyOnce checks that topic's stream holds exactly one
// message for each of ids and nothing else.
func checkStreamExactlyOnce(t testing.TB, b *jetstream.Bus, topic string, ids []string) {
	t.Helper()
	msgs := readStream(t, b, topic)
	count := make(map[string]int, len(msgs))
	for _, m := range msgs {
		count[m.id]++
	}
	if len(msgs) != len(ids) || len(count) != len(ids) {
		t.Errorf("stream of %s: %d messages, %d distinct ids; want %d of each", topic, len(msgs), len(count), len(ids))
	}
	missing := 0
	for _, id := range ids {
		if count[id] != 1 {
			missing++
			if missing <= 5 {
				t.Errorf("id %s is in the stream %d times", id, count[id])
			}
		}
	}
	if missing > 5 {
		t.Errorf("... %d ids not exactly once in all", missing)
	}
}

// recordingPublisher wraps a publisher. before runs before each publish and
// may fail it; after runs after a successful one. Calls are counted by id.
type recordingPublisher struct {
	inner  facade.Publisher
	before func(ctx context.Context, topic string, opts facade.PublishOptions) error
	after  func(e *facade.EventRecord)

	mu    sync.Mutex
	calls map[string]int
}

func (p *recordingPublisher) Publish(ctx context.Context, topic string, payload json.RawMessage, opts facade.PublishOptions) (*facade.EventRecord, error) {
	p.mu.Lock()
	if p.calls == nil {
		p.calls = make(map[string]int)
	}
	p.calls[opts.ID]++
	p.mu.Unlock()
	if p.before != nil {
		if err := p.before(ctx, topic, opts); err != nil {
			return nil, err
		}
	}
	e, err := p.inner.Publish(ctx, topic, payload, opts)
	if err == nil && p.after != nil {
		p.after(e)
	}
	return e, err
}

func (p *recordingPublisher) callsOf(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[id]
}

// fastConfig is a drainer configuration for tests: short poll and
// backoffs, warnings logged to t.
func fastConfig(t testing.TB, worker string) outbox.Config {
	return outbox.Config{
		WorkerID:     worker,
		PollInterval: 20 * time.Millisecond,
		BackoffBase:  10 * time.Millisecond,
		BackoffMax:   50 * time.Millisecond,
		Lease:        15 * time.Second,
		Timeout:      15 * time.Second,
		Logger:       slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// testWriter writes log lines to t.Log. Drainers using it must stop before
// the test ends (runDrainer's cleanup does).
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
