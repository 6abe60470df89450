package idempotent_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/idempotent"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/internal/pgtest"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/outbox"
	_ "github.com/eventhub/eventhub/outbox/postgres" // drivers "pgx" and "sqlite"
	_ "github.com/eventhub/eventhub/outbox/sqlite"
)

func TestMain(m *testing.M) {
	os.Exit(pgtest.Run(m))
}

const (
	topic  = "idem.orders"
	group  = "billing"
	events = 5
	victim = 2 // index of the event whose first delivery crashes
)

var errCrash = errors.New("consumer killed")

// member is one consumer process: its own connection and bus.
type member struct {
	bus  *jetstream.Bus
	kill func() // drops the connection, as a dead process does
}

func newMember(t *testing.T, srv *server.Server) *member {
	t.Helper()
	nc := natstest.InProcessConn(t, srv)
	bus, err := jetstream.New(nc, jetstream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	return &member{bus: bus, kill: nc.Close}
}

func publishEvents(t *testing.T, bus *jetstream.Bus) []*facade.EventRecord {
	t.Helper()
	var out []*facade.EventRecord
	for i := range events {
		e, err := bus.Publish(t.Context(), topic, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), facade.PublishOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// attempts records the delivery attempts of each event id, before the
// wrapped handler runs.
type attempts struct {
	mu sync.Mutex
	m  map[string][]int
}

func (a *attempts) wrap(h facade.Handler) facade.Handler {
	return func(ctx context.Context, d facade.Delivery) error {
		a.mu.Lock()
		if a.m == nil {
			a.m = map[string][]int{}
		}
		a.m[d.Event().ID] = append(a.m[d.Event().ID], d.Attempt())
		a.mu.Unlock()
		return h(ctx, d)
	}
}

func (a *attempts) of(id string) []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.m[id]...)
}

var subOpts = facade.SubscribeOptions{From: facade.FromEarliest, MaxInFlight: 1, AckTimeoutMs: 1000, MaxAttempts: 10}

// crashAt returns a hook that, at stage for the victim event's first
// delivery, kills m and abandons the delivery, and a channel closed then.
func crashAt(stage string, victimID string, m *member) (func(string, *facade.EventRecord) error, <-chan struct{}) {
	var once sync.Once
	done := make(chan struct{})
	return func(s string, e *facade.EventRecord) error {
		if s != stage || e.ID != victimID {
			return nil
		}
		crashed := false
		once.Do(func() { m.kill(); crashed = true; close(done) })
		if crashed {
			return errCrash
		}
		return nil
	}, done
}

// awaitCrash waits for the crash, then stops what is left of the dead
// member's subscription (its connection is gone: nothing it does reaches
// the server).
func awaitCrash(t *testing.T, crashed <-chan struct{}, sub facade.Subscription) {
	t.Helper()
	select {
	case <-crashed:
	case <-time.After(20 * time.Second):
		t.Fatal("the victim was never delivered to the first member")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = sub.Stop(ctx)
}

type sqlBackend struct {
	name    string
	dialect outbox.Dialect
	open    func(t testing.TB) *sql.DB
}

var sqlBackends = []sqlBackend{
	{"postgres", outbox.Postgres, func(t testing.TB) *sql.DB { return openDB(t, "pgx", pgtest.Start(t)) }},
	{"sqlite", outbox.SQLite, func(t testing.TB) *sql.DB {
		return openDB(t, "sqlite", outbox.SQLiteDSN(filepath.Join(t.TempDir(), "app.db")))
	}},
}

func openDB(t testing.TB, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newSQLStore(t testing.TB, db *sql.DB, d outbox.Dialect) *idempotent.SQL {
	t.Helper()
	s, err := idempotent.NewSQL(db, idempotent.SQLConfig{Dialect: d})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE effects (event_id TEXT NOT NULL, n INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return s
}

func insertEffect(d outbox.Dialect) string {
	if d == outbox.Postgres {
		return `INSERT INTO effects (event_id, n) VALUES ($1, 1)`
	}
	return `INSERT INTO effects (event_id, n) VALUES (?, 1)`
}

// effects counts the effect rows of each event id.
func effects(t *testing.T, db *sql.DB) map[string]int {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT event_id, COUNT(*) FROM effects GROUP BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSQLCrashAppliesOnce kills the consumer after the handler wrote its
// effect but before the commit (so before the ack), and after the commit
// but before the ack. Either way a second member gets the event again
// (attempt 2) and every event's effect is in the database exactly once.
func TestSQLCrashAppliesOnce(t *testing.T) {
	for _, be := range sqlBackends {
		for _, stage := range []struct {
			name string
			// wantRuns is how often the handler runs for the victim.
			wantRuns int
		}{{"written", 2}, {"committed", 1}} {
			t.Run(be.name+"/"+stage.name, func(t *testing.T) {
				t.Parallel()
				srv := natstest.RunEmbedded(t)
				m1, m2 := newMember(t, srv), newMember(t, srv)
				evs := publishEvents(t, m1.bus)
				db := be.open(t)
				store := newSQLStore(t, db, be.dialect)

				var mu sync.Mutex
				runs := map[string]int{}
				h := store.Wrap(func(ctx context.Context, tx *sql.Tx, e *facade.EventRecord) error {
					mu.Lock()
					runs[e.ID]++
					mu.Unlock()
					_, err := tx.ExecContext(ctx, insertEffect(be.dialect), e.ID)
					return err
				})
				hook, crashed := crashAt(stage.name, evs[victim].ID, m1)
				store.SetHook(hook)
				var att attempts
				sub1, err := m1.bus.Subscribe(t.Context(), topic, group, att.wrap(h), subOpts)
				if err != nil {
					t.Fatal(err)
				}
				// The first member dies at the victim.
				awaitCrash(t, crashed, sub1)
				sub2, err := m2.bus.Subscribe(t.Context(), topic, group, att.wrap(h), subOpts)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = sub2.Stop(context.Background()) })
				testutil.CheckFor(t, 20*time.Second, func() error {
					if got := effects(t, db); len(got) < events {
						return fmt.Errorf("%d of %d events applied", len(got), events)
					}
					if a := att.of(evs[victim].ID); len(a) < 2 {
						return fmt.Errorf("victim delivered %v", a)
					}
					return nil
				})
				got := effects(t, db)
				for _, e := range evs {
					if got[e.ID] != 1 {
						t.Errorf("event %s applied %d times", e.ID, got[e.ID])
					}
				}
				if a := att.of(evs[victim].ID); len(a) != 2 || a[1] < 2 {
					t.Errorf("victim's deliveries had attempts %v, want a redelivery", a)
				}
				mu.Lock()
				if n := runs[evs[victim].ID]; n != stage.wantRuns {
					t.Errorf("handler ran %d times for the victim, want %d", n, stage.wantRuns)
				}
				mu.Unlock()
				for _, e := range evs {
					if ok, err := store.Processed(t.Context(), group, e.ID); err != nil || !ok {
						t.Errorf("Processed(%s) = %v, %v", e.ID, ok, err)
					}
				}
			})
		}
	}
}

// TestSQLHandlerErrorRollsBack: a failing handler's writes and mark roll
// back, the delivery is nacked and the retry applies the event once.
func TestSQLHandlerErrorRollsBack(t *testing.T) {
	srv := natstest.RunEmbedded(t)
	m := newMember(t, srv)
	evs := publishEvents(t, m.bus)
	be := sqlBackends[1]
	db := be.open(t)
	store := newSQLStore(t, db, be.dialect)
	var once sync.Once
	h := store.Wrap(func(ctx context.Context, tx *sql.Tx, e *facade.EventRecord) error {
		if _, err := tx.ExecContext(ctx, insertEffect(be.dialect), e.ID); err != nil {
			return err
		}
		fail := false
		if e.ID == evs[1].ID {
			once.Do(func() { fail = true })
		}
		if fail {
			return errors.New("downstream refused")
		}
		return nil
	})
	sub, err := m.bus.Subscribe(t.Context(), topic, group, h, subOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Stop(context.Background()) })
	testutil.CheckFor(t, 20*time.Second, func() error {
		if got := effects(t, db); len(got) < events {
			return fmt.Errorf("%d of %d events applied", len(got), events)
		}
		return nil
	})
	for id, n := range effects(t, db) {
		if n != 1 {
			t.Errorf("event %s applied %d times", id, n)
		}
	}
}

func newKV(t *testing.T, bus *jetstream.Bus) *idempotent.KV {
	t.Helper()
	kv, err := idempotent.NewKV(t.Context(), bus, idempotent.KVConfig{Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// TestKVCrash kills the consumer after the mark was put but before the
// ack: the redelivery finds the mark and the effect happens once. Killed
// after the effect but before the mark, the redelivery runs the handler
// again: the KV store's documented limit (effects that must happen once
// belong in the SQL store's transaction).
func TestKVCrash(t *testing.T) {
	for _, stage := range []struct {
		name       string
		wantVictim int
	}{{"marked", 1}, {"handled", 2}} {
		t.Run(stage.name, func(t *testing.T) {
			t.Parallel()
			srv := natstest.RunEmbedded(t)
			m1, m2 := newMember(t, srv), newMember(t, srv)
			evs := publishEvents(t, m1.bus)
			var mu sync.Mutex
			applied := map[string]int{}
			handler := func(ctx context.Context, e *facade.EventRecord) error {
				mu.Lock()
				applied[e.ID]++
				mu.Unlock()
				return nil
			}
			kv1 := newKV(t, m1.bus)
			hook, crashed := crashAt(stage.name, evs[victim].ID, m1)
			kv1.SetHook(hook)
			var att attempts
			sub1, err := m1.bus.Subscribe(t.Context(), topic, group, att.wrap(kv1.Wrap(handler)), subOpts)
			if err != nil {
				t.Fatal(err)
			}
			awaitCrash(t, crashed, sub1)
			kv2 := newKV(t, m2.bus)
			sub2, err := m2.bus.Subscribe(t.Context(), topic, group, att.wrap(kv2.Wrap(handler)), subOpts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sub2.Stop(context.Background()) })
			testutil.CheckFor(t, 20*time.Second, func() error {
				for _, e := range evs {
					if ok, err := kv2.Processed(t.Context(), group, e.ID); err != nil || !ok {
						return fmt.Errorf("%s not processed (%v)", e.ID, err)
					}
				}
				if a := att.of(evs[victim].ID); len(a) < 2 {
					return fmt.Errorf("victim delivered %v", a)
				}
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			for i, e := range evs {
				want := 1
				if i == victim {
					want = stage.wantVictim
				}
				if applied[e.ID] != want {
					t.Errorf("event %d applied %d times, want %d", i, applied[e.ID], want)
				}
			}
			if a := att.of(evs[victim].ID); len(a) != 2 || a[1] < 2 {
				t.Errorf("victim's deliveries had attempts %v, want a redelivery", a)
			}
		})
	}
}

func TestKVConfig(t *testing.T) {
	srv := natstest.RunEmbedded(t)
	m := newMember(t, srv)
	publishEvents(t, m.bus) // creates the topic's stream (2 min duplicate window)
	tests := []struct {
		name    string
		cfg     idempotent.KVConfig
		wantErr error
	}{
		{"defaults", idempotent.KVConfig{Topics: []string{topic}}, nil},
		{"TTL below the duplicate window", idempotent.KVConfig{TTL: time.Minute, Topics: []string{topic}}, idempotent.ErrInvalidConfig},
		{"bad bucket", idempotent.KVConfig{Bucket: "a.b"}, idempotent.ErrInvalidConfig},
		{"negative TTL", idempotent.KVConfig{TTL: -1}, idempotent.ErrInvalidConfig},
		{"unknown topic", idempotent.KVConfig{Topics: []string{"no.such"}}, facade.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := idempotent.NewKV(t.Context(), m.bus, tt.cfg)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
		})
	}
}
