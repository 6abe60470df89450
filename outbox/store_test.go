package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/outbox"
)

func TestAddValidates(t *testing.T) {
	s := openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "v.db"))
	tests := []struct {
		name    string
		rec     outbox.Record
		wantErr error
	}{
		{"ok", outbox.Record{Topic: "orders.created", Payload: json.RawMessage(`{"a":1}`)}, nil},
		{"ok with id key headers", outbox.Record{ID: facade.NewID(), Topic: "a.b", Key: "host:x:1", Payload: json.RawMessage(`1`), Headers: map[string]string{"h": "v"}}, nil},
		{"bad topic", outbox.Record{Topic: "bad topic!", Payload: json.RawMessage(`1`)}, facade.ErrBadTopic},
		{"empty topic", outbox.Record{Payload: json.RawMessage(`1`)}, facade.ErrBadTopic},
		{"empty payload", outbox.Record{Topic: "a"}, facade.ErrBadPayload},
		{"invalid json", outbox.Record{Topic: "a", Payload: json.RawMessage(`{`)}, facade.ErrBadPayload},
		{"two values", outbox.Record{Topic: "a", Payload: json.RawMessage(`1 2`)}, facade.ErrBadPayload},
		{"bad key", outbox.Record{Topic: "a", Key: "\xff", Payload: json.RawMessage(`1`)}, facade.ErrBadKey},
		{"id with space", outbox.Record{ID: "a b", Topic: "a", Payload: json.RawMessage(`1`)}, facade.ErrBadID},
		{"id too long", outbox.Record{ID: strings.Repeat("x", 129), Topic: "a", Payload: json.RawMessage(`1`)}, facade.ErrBadID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tx, err := s.DB().BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			id, err := s.Add(t.Context(), tx, tt.rec)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Add err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && (id == "" || tt.rec.ID != "" && id != tt.rec.ID) {
				t.Fatalf("id = %q for record id %q", id, tt.rec.ID)
			}
		})
	}
	if _, err := s.Add(t.Context(), nil, outbox.Record{Topic: "a", Payload: json.RawMessage(`1`)}); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("Add without tx: %v", err)
	}
}

func TestStoreConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     outbox.StoreConfig
		wantErr error
	}{
		{"default table", outbox.StoreConfig{Dialect: outbox.SQLite}, nil},
		{"custom table", outbox.StoreConfig{Dialect: outbox.Postgres, Table: "svc_outbox_2"}, nil},
		{"no dialect", outbox.StoreConfig{}, outbox.ErrInvalidConfig},
		{"unknown dialect", outbox.StoreConfig{Dialect: "mysql"}, outbox.ErrInvalidConfig},
		{"injection", outbox.StoreConfig{Dialect: outbox.SQLite, Table: "x; DROP TABLE y"}, outbox.ErrInvalidConfig},
		{"quoted", outbox.StoreConfig{Dialect: outbox.SQLite, Table: `"x"`}, outbox.ErrInvalidConfig},
		{"schema qualified", outbox.StoreConfig{Dialect: outbox.Postgres, Table: "public.outbox"}, outbox.ErrInvalidConfig},
		{"leading digit", outbox.StoreConfig{Dialect: outbox.SQLite, Table: "1outbox"}, outbox.ErrInvalidConfig},
		{"too long", outbox.StoreConfig{Dialect: outbox.SQLite, Table: strings.Repeat("t", 49)}, outbox.ErrInvalidConfig},
		{"negative timeout", outbox.StoreConfig{Dialect: outbox.SQLite, Timeout: -1}, outbox.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Validate = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestOpenPicksDriverFromDSN(t *testing.T) {
	dir := t.TempDir()
	pg := pgDSN(t)
	tests := []struct {
		name    string
		dsn     string
		want    outbox.Dialect
		wantErr error
	}{
		{"postgres url", pg, outbox.Postgres, nil},
		{"postgresql url", strings.Replace(pg, "postgres://", "postgresql://", 1), outbox.Postgres, nil},
		{"sqlite scheme", "sqlite:" + filepath.Join(dir, "a.db"), outbox.SQLite, nil},
		{"sqlite url", "sqlite://" + filepath.Join(dir, "b.db"), outbox.SQLite, nil},
		{"file uri", "file:" + filepath.Join(dir, "c.db") + "?mode=rwc", outbox.SQLite, nil},
		{"plain path", filepath.Join(dir, "d.db"), outbox.SQLite, nil},
		{"mysql", "mysql://u:secret@h/db", "", outbox.ErrUnsupportedDSN},
		{"empty", "", "", outbox.ErrUnsupportedDSN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := outbox.Open(t.Context(), tt.dsn)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Open = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if strings.Contains(err.Error(), "secret") {
					t.Fatalf("error leaks the password: %v", err)
				}
				return
			}
			defer s.Close()
			if s.Dialect() != tt.want || s.Table() != outbox.DefaultTable {
				t.Fatalf("dialect %q table %q", s.Dialect(), s.Table())
			}
			// Open migrated: the table is usable.
			if _, err := s.Stats(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestSQLiteDSN(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/x/a.db", "/x/a.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate"},
		{"file:a.db?mode=rwc", "file:a.db?mode=rwc&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate"},
		{"a.db?_pragma=busy_timeout(1)&_txlock=deferred", "a.db?_pragma=busy_timeout(1)&_txlock=deferred&_pragma=journal_mode(WAL)"},
		{"a.db?_busy_timeout=5&_journal_mode=DELETE&_txlock=exclusive", "a.db?_busy_timeout=5&_journal_mode=DELETE&_txlock=exclusive"},
	}
	for _, tt := range tests {
		if got := outbox.SQLiteDSN(tt.in); got != tt.want {
			t.Errorf("SQLiteDSN(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// pgDSN returns the DSN of a new PostgreSQL database.
func pgDSN(t testing.TB) string { return backends[0].dsn(t) }

// The store conformance cases, against PostgreSQL and SQLite.
func TestStore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend, dsn string) {
		ctx := t.Context()
		s := openStore(t, dsn)

		t.Run("MigrateIdempotent", func(t *testing.T) {
			for range 3 {
				if err := s.Migrate(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})

		t.Run("CustomTable", func(t *testing.T) {
			s2, err := outbox.OpenConfig(ctx, dsn, outbox.StoreConfig{Table: "svc_outbox"})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			id := add(t, s2, outbox.Record{Topic: "x", Payload: json.RawMessage(`1`)})
			if _, err := s.Get(ctx, id); !errors.Is(err, outbox.ErrNotFound) {
				t.Fatalf("record of svc_outbox found in %s: %v", s.Table(), err)
			}
			if _, err := s2.Get(ctx, id); err != nil {
				t.Fatal(err)
			}
			if _, err := outbox.OpenConfig(ctx, dsn, outbox.StoreConfig{Dialect: other(be)}); !errors.Is(err, outbox.ErrInvalidConfig) {
				t.Fatalf("contradicting dialect: %v", err)
			}
		})

		t.Run("AddGetRoundTrip", func(t *testing.T) {
			rec := outbox.Record{Topic: "orders.created", Key: "order:42", Payload: json.RawMessage(`{"b": [1, 2],  "a":"é"}`),
				Headers: map[string]string{"trace": "t-1"}}
			before := time.Now().Add(-time.Second)
			id := add(t, s, rec)
			e, err := s.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if e.Topic != rec.Topic || e.Key != rec.Key || string(e.Payload) != string(rec.Payload) ||
				e.Headers["trace"] != "t-1" || e.Status != outbox.StatusPending || e.Attempts != 0 {
				t.Fatalf("entry %+v", e)
			}
			if e.CreatedAt.Before(before) || e.CreatedAt.After(time.Now().Add(time.Second)) || e.NextAttemptAt.IsZero() ||
				!e.LeaseUntil.IsZero() || !e.SentAt.IsZero() {
				t.Fatalf("times %+v", e)
			}
			if _, ok := facade.IDTime(id); !ok {
				t.Fatalf("default id %q is not a uuidv7", id)
			}
			// The same id twice is refused by the primary key.
			tx, _ := s.DB().BeginTx(ctx, nil)
			defer tx.Rollback()
			if _, err := s.Add(ctx, tx, outbox.Record{ID: id, Topic: "x", Payload: json.RawMessage(`1`)}); err == nil {
				t.Fatal("duplicate id accepted")
			}
			if _, err := s.Get(ctx, "nope"); !errors.Is(err, outbox.ErrNotFound) {
				t.Fatalf("Get unknown: %v", err)
			}
		})

		t.Run("AddMany", func(t *testing.T) {
			// 2,500 records in three statements: on SQLite under the race
			// detector on a loaded machine a statement can take longer than
			// the store's default 10 s, which applies only without a deadline.
			ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			tx, err := s.DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			recs := make([]outbox.Record, 2500) // three statements
			for i := range recs {
				recs[i] = outbox.Record{Topic: "many.test", Key: fmt.Sprint(i % 7), Payload: json.RawMessage(fmt.Sprint(i))}
			}
			recs[3].ID = "custom-id-3"
			recs[4].Headers = map[string]string{"i": "4"}
			bad := append([]outbox.Record(nil), recs...)
			bad[2000] = outbox.Record{Topic: "many.test", Payload: json.RawMessage(`{`)}
			if _, err := s.AddMany(ctx, tx, bad); !errors.Is(err, facade.ErrBadPayload) || !strings.Contains(err.Error(), "record 2000") {
				t.Fatalf("AddMany with a bad record: %v", err)
			}
			ids, err := s.AddMany(ctx, tx, recs)
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if len(ids) != len(recs) || ids[3] != "custom-id-3" {
				t.Fatalf("%d ids, ids[3] = %q", len(ids), ids[3])
			}
			for _, i := range []int{0, 4, 1999, 2499} {
				e, err := s.Get(ctx, ids[i])
				if err != nil {
					t.Fatal(err)
				}
				if string(e.Payload) != fmt.Sprint(i) || e.Key != fmt.Sprint(i%7) || e.Topic != "many.test" {
					t.Fatalf("record %d: %+v", i, e)
				}
				if i == 4 && e.Headers["i"] != "4" {
					t.Fatalf("headers %v", e.Headers)
				}
			}
		})
	})
}

func other(be backend) outbox.Dialect {
	if be.name == "postgres" {
		return outbox.SQLite
	}
	return outbox.Postgres
}

// Claims, fencing, release, requeue, retention and stats, against both
// databases; each case has a database of its own.
func TestStoreLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend, dsn string) {
		ctx := t.Context()
		s := openStore(t, dsn)
		ids := addN(t, s, "life.cycle", 10)

		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Pending != 10 || st.Claimed != 0 || st.Failed != 0 || st.OldestUnsent.IsZero() || st.OldestUnsentAge < 0 {
			t.Fatalf("stats %+v", st)
		}

		// Oldest first, exclusive.
		a, err := s.Claim(ctx, "A", 4, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Claim(ctx, "B", 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got := entryIDs(a); fmt.Sprint(got) != fmt.Sprint(ids[:4]) {
			t.Fatalf("A claimed %v, want %v", got, ids[:4])
		}
		if got := entryIDs(b); fmt.Sprint(got) != fmt.Sprint(ids[4:]) {
			t.Fatalf("B claimed %v, want %v", got, ids[4:])
		}
		for _, e := range append(a, b...) {
			if e.Status != outbox.StatusClaimed || e.Attempts != 1 || e.LeaseUntil.Before(time.Now()) {
				t.Fatalf("claimed entry %+v", e)
			}
		}
		if more, err := s.Claim(ctx, "C", 10, time.Minute); err != nil || len(more) != 0 {
			t.Fatalf("third claim got %d, %v", len(more), err)
		}
		if st, _ := s.Stats(ctx); st.Pending != 0 || st.Claimed != 10 {
			t.Fatalf("stats after claims %+v", st)
		}

		// Fencing: B cannot settle A's claims, nor a stale attempt.
		forged := *a[0]
		forged.ClaimedBy = "B"
		if n, err := s.MarkSent(ctx, &forged); err != nil || n != 0 {
			t.Fatalf("MarkSent by the wrong worker: %d, %v", n, err)
		}
		stale := *a[0]
		stale.Attempts = 0
		if n, err := s.MarkSent(ctx, &stale); err != nil || n != 0 {
			t.Fatalf("MarkSent of a stale attempt: %d, %v", n, err)
		}
		if err := s.MarkError(ctx, &forged, "x"); !errors.Is(err, outbox.ErrLeaseLost) {
			t.Fatalf("MarkError by the wrong worker: %v", err)
		}

		// A: two sent, one parked, one released for a retry.
		if n, err := s.MarkSent(ctx, a[0], a[1]); err != nil || n != 2 {
			t.Fatalf("MarkSent: %d, %v", n, err)
		}
		if n, err := s.MarkSent(ctx, a[0]); err != nil || n != 0 {
			t.Fatalf("MarkSent twice: %d, %v", n, err)
		}
		if err := s.MarkError(ctx, a[2], "bad_topic: nope"); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Release(ctx, outbox.ReleaseOptions{Delay: time.Hour, Reason: "boom"}, a[3]); err != nil || n != 1 {
			t.Fatalf("Release: %d, %v", n, err)
		}
		checkEntry(t, s, a[0].ID, outbox.StatusSent, 1, "")
		checkEntry(t, s, a[2].ID, outbox.StatusError, 1, "bad_topic: nope")
		e := checkEntry(t, s, a[3].ID, outbox.StatusPending, 1, "boom")
		if time.Until(e.NextAttemptAt) < 50*time.Minute || e.ClaimedBy != "" || !e.LeaseUntil.IsZero() {
			t.Fatalf("released entry %+v", e)
		}
		sent, _ := s.Get(ctx, a[0].ID)
		if sent.SentAt.IsZero() || sent.ClaimedBy != "A" {
			t.Fatalf("sent entry %+v", sent)
		}
		// Not due: a claim does not take it.
		if got, _ := s.Claim(ctx, "C", 10, time.Minute); len(got) != 0 {
			t.Fatalf("claimed a record that is not due: %v", entryIDs(got))
		}

		// B: release uncounted (not published), then re-claim.
		if n, err := s.Release(ctx, outbox.ReleaseOptions{Uncount: true}, b...); err != nil || n != int64(len(b)) {
			t.Fatalf("Release uncounted: %d, %v", n, err)
		}
		checkEntry(t, s, b[0].ID, outbox.StatusPending, 0, "")
		b2, err := s.Claim(ctx, "B", 100, 20*time.Millisecond)
		if err != nil || len(b2) != len(b) {
			t.Fatalf("re-claim: %d, %v", len(b2), err)
		}

		// Expired leases are requeued; with attempts exhausted, parked.
		testutil.CheckFor(t, 5*time.Second, func() error {
			if !time.Now().After(b2[0].LeaseUntil.Add(5 * time.Millisecond)) {
				return errors.New("lease not expired yet")
			}
			return nil
		})
		// b2[0] was claimed once before (uncounted) and now: attempts 1.
		requeued, parked, err := s.RequeueExpired(ctx, 1)
		if err != nil || requeued != 0 || parked != int64(len(b2)) {
			t.Fatalf("RequeueExpired(1): requeued %d parked %d, %v", requeued, parked, err)
		}
		checkEntry(t, s, b2[0].ID, outbox.StatusError, 1, "lease of B expired")
		if n, err := s.RetryFailed(ctx, entryIDs(b2)...); err != nil || n != int64(len(b2)) {
			t.Fatalf("RetryFailed: %d, %v", n, err)
		}
		checkEntry(t, s, b2[0].ID, outbox.StatusPending, 0, "lease of B expired")
		b3, err := s.Claim(ctx, "B", 100, time.Millisecond)
		if err != nil || len(b3) != len(b2) {
			t.Fatalf("claim after retry: %d, %v", len(b3), err)
		}
		var requeuedAll int64
		testutil.CheckFor(t, 5*time.Second, func() error {
			requeued, parked, err := s.RequeueExpired(ctx, 0)
			if err != nil {
				return err
			}
			requeuedAll += requeued
			if requeuedAll != int64(len(b3)) || parked != 0 {
				return fmt.Errorf("requeued %d parked %d", requeuedAll, parked)
			}
			return nil
		})
		// The old claim cannot settle what was requeued.
		if n, _ := s.MarkSent(ctx, b3...); n != 0 {
			t.Fatalf("MarkSent after requeue marked %d", n)
		}

		// Stats: 6 pending + 1 waiting (a[3]), 1 parked, 2 sent.
		st, err = s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Pending != 7 || st.Claimed != 0 || st.Failed != 1 {
			t.Fatalf("stats %+v", st)
		}

		// Retention: only records sent longer ago than olderThan go.
		if n, err := s.DeleteSent(ctx, time.Hour, 100); err != nil || n != 0 {
			t.Fatalf("DeleteSent(1h): %d, %v", n, err)
		}
		if n, err := s.DeleteSent(ctx, 0, 1); err != nil || n != 1 {
			t.Fatalf("DeleteSent(0, 1): %d, %v", n, err)
		}
		if n, err := s.DeleteSent(ctx, 0, 100); err != nil || n != 1 {
			t.Fatalf("DeleteSent(0, 100): %d, %v", n, err)
		}
		if countStatus(t, s, outbox.StatusSent) != 0 || countStatus(t, s, outbox.StatusError) != 1 {
			t.Fatal("DeleteSent deleted the wrong records")
		}
	})
}

func entryIDs(es []*outbox.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func checkEntry(t testing.TB, s *outbox.Store, id string, st outbox.Status, attempts int, lastErr string) *outbox.Entry {
	t.Helper()
	e, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != st || e.Attempts != attempts || e.LastErr != lastErr {
		t.Fatalf("entry %s: status %s attempts %d last_err %q; want %s %d %q", id, e.Status, e.Attempts, e.LastErr, st, attempts, lastErr)
	}
	return e
}

// Claims by concurrent claimers, each with its own *sql.DB, never overlap.
func TestStoreConcurrentClaimsAreExclusive(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend, dsn string) {
		ctx := t.Context()
		s := openStore(t, dsn)
		const n, workers = 600, 4
		ids := addN(t, s, "claims", n)
		type result struct {
			ids []string
			err error
		}
		results := make(chan result, workers)
		for w := range workers {
			ws := openStore(t, dsn)
			go func() {
				var got []string
				for {
					es, err := ws.Claim(ctx, fmt.Sprintf("w%d", w), 7, time.Minute)
					if err != nil {
						results <- result{got, err}
						return
					}
					if len(es) == 0 {
						results <- result{got, nil}
						return
					}
					got = append(got, entryIDs(es)...)
				}
			}()
		}
		seen := make(map[string]int)
		for range workers {
			r := <-results
			if r.err != nil {
				t.Fatal(r.err)
			}
			for _, id := range r.ids {
				seen[id]++
			}
		}
		for _, id := range ids {
			if seen[id] != 1 {
				t.Fatalf("record %s claimed %d times", id, seen[id])
			}
		}
		if len(seen) != n {
			t.Fatalf("claimed %d distinct records, want %d", len(seen), n)
		}
	})
}
