package outbox

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eventhub/eventhub/facade"
)

// StoreConfig configures a [Store]. The zero value is valid for [Open]
// (which infers the dialect from the DSN); [NewStore] needs Dialect.
type StoreConfig struct {
	// Dialect is the database's SQL dialect: [Postgres] or [SQLite].
	Dialect Dialect
	// Table is the outbox table's name (default [DefaultTable]): a plain
	// identifier of letters, digits and '_', at most 48 bytes. Indexes are
	// named after it.
	Table string
	// Timeout bounds each statement whose ctx has no deadline (default 10s).
	Timeout time.Duration
}

// Validate reports the first invalid setting, wrapping [ErrInvalidConfig].
func (c StoreConfig) Validate() error {
	switch c.Dialect {
	case Postgres, SQLite:
	default:
		return fmt.Errorf("%w: dialect %q: want %q or %q", ErrInvalidConfig, c.Dialect, Postgres, SQLite)
	}
	if c.Table != "" {
		if err := validTable(c.Table); err != nil {
			return err
		}
	}
	if c.Timeout < 0 {
		return fmt.Errorf("%w: negative timeout", ErrInvalidConfig)
	}
	return nil
}

func (c StoreConfig) withDefaults() StoreConfig {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	return c
}

// Store is an outbox table in a PostgreSQL or SQLite database. It is safe for
// concurrent use, by any number of goroutines and processes: every state
// change is one statement, and the statements that settle a claim are fenced
// by the claiming worker and attempt number.
//
// A Store made by [NewStore] borrows its *sql.DB and never closes it; one made
// by [Open] owns it and closes it on [Store.Close].
type Store struct {
	db      *sql.DB
	own     bool
	cfg     StoreConfig
	q       queries
	lockKey int64
}

// NewStore returns a store on db, which must be a database of cfg.Dialect
// (driver "pgx" for [Postgres], "sqlite" for [SQLite]). It does no I/O: call
// [Store.Migrate] to create the table. The store never closes db.
//
// For SQLite, open db with a busy timeout and WAL ([SQLiteDSN] builds such a
// DSN); without a busy timeout concurrent writers fail with SQLITE_BUSY.
func NewStore(db *sql.DB, cfg StoreConfig) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	h := fnv.New64a()
	h.Write([]byte("eventhub/outbox:" + strings.ToLower(cfg.Table)))
	return &Store{
		db:      db,
		cfg:     cfg,
		q:       buildQueries(cfg.Dialect, cfg.Table),
		lockKey: int64(h.Sum64() >> 1),
	}, nil
}

// Open connects to the database named by dsn, creates the outbox table and
// its indexes if they do not exist, and returns a store that owns the
// connection pool. The driver is picked from the DSN:
//
//   - postgres://... or postgresql://... : PostgreSQL through pgx;
//   - sqlite:PATH, sqlite://PATH, file:PATH or a plain file path: SQLite.
//
// SQLite DSNs get the parameters of [SQLiteDSN] that they do not set
// themselves (busy timeout, WAL journal, immediate transactions). Errors wrap
// [ErrUnsupportedDSN] for other DSNs.
//
// Package outbox links no database driver: import outbox/postgres or
// outbox/sqlite (or a driver registered under the same name) for the DSNs
// you use. A DSN whose driver is not linked is refused with
// [ErrDriverNotLinked].
func Open(ctx context.Context, dsn string) (*Store, error) {
	return OpenConfig(ctx, dsn, StoreConfig{})
}

// OpenConfig is [Open] with a configuration (table name, timeout). A
// cfg.Dialect that contradicts the DSN is an error.
func OpenConfig(ctx context.Context, dsn string, cfg StoreConfig) (*Store, error) {
	driverName, source, d, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if cfg.Dialect != "" && cfg.Dialect != d {
		return nil, fmt.Errorf("%w: dialect %q but the DSN is for %q", ErrInvalidConfig, cfg.Dialect, d)
	}
	cfg.Dialect = d
	if err := driverLinked(sql.Drivers(), driverName, d); err != nil {
		return nil, err
	}
	db, err := sql.Open(driverName, source)
	if err != nil {
		return nil, fmt.Errorf("outbox: open %s database: %w", d, err)
	}
	s, err := NewStore(db, cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.own = true
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("outbox: connect to %s database: %w", d, err)
	}
	if err := s.Migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// driverPackage names the package that links each dialect's driver.
var driverPackage = map[Dialect]string{
	Postgres: "github.com/eventhub/eventhub/outbox/postgres",
	SQLite:   "github.com/eventhub/eventhub/outbox/sqlite",
}

// driverLinked reports ErrDriverNotLinked unless linked (the registered
// database/sql drivers) holds driverName.
func driverLinked(linked []string, driverName string, d Dialect) error {
	if slices.Contains(linked, driverName) {
		return nil
	}
	return fmt.Errorf("%w: %s needs the %q driver: import _ %q", ErrDriverNotLinked, d, driverName, driverPackage[d])
}

// parseDSN picks the driver of a DSN.
func parseDSN(dsn string) (driverName, source string, d Dialect, err error) {
	lower := strings.ToLower(dsn)
	switch {
	case dsn == "":
		return "", "", "", fmt.Errorf("%w: empty DSN", ErrUnsupportedDSN)
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		return "pgx", dsn, Postgres, nil
	case strings.HasPrefix(lower, "sqlite://"):
		return "sqlite", SQLiteDSN(dsn[len("sqlite://"):]), SQLite, nil
	case strings.HasPrefix(lower, "sqlite:"):
		return "sqlite", SQLiteDSN(dsn[len("sqlite:"):]), SQLite, nil
	case strings.HasPrefix(lower, "file:"):
		return "sqlite", SQLiteDSN(dsn), SQLite, nil
	case strings.Contains(dsn, "://"):
		return "", "", "", fmt.Errorf("%w: %q: want postgres://, postgresql://, sqlite: or file:", ErrUnsupportedDSN, redactDSN(dsn))
	}
	return "sqlite", SQLiteDSN(dsn), SQLite, nil
}

// redactDSN drops the password from a URL-shaped DSN.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "redacted")
	}
	return u.String()
}

// SQLiteDSN returns a modernc.org/sqlite DSN for path (a file path or a
// file: URI) with the parameters the outbox needs and the DSN does not set:
// a 10 s busy timeout (_pragma=busy_timeout(10000)), the WAL journal
// (_pragma=journal_mode(WAL), readers do not block the writer) and
// _txlock=immediate (transactions take the write lock at BEGIN, so two
// read-then-write transactions cannot deadlock each other into SQLITE_BUSY).
//
// It leaves SQLite's synchronous setting alone: FULL, one fsync per commit,
// which on a slow disk bounds how many transactions (the service's, and the
// drainer's claims and marks) commit per second. _pragma=synchronous(NORMAL)
// is much faster, but a power cut can then roll back the last commits after
// the drainer published their events: the events of a transaction that, in
// the end, did not commit.
func SQLiteDSN(path string) string {
	base, query, _ := strings.Cut(path, "?")
	vals, err := url.ParseQuery(query)
	if err != nil {
		vals = url.Values{}
	}
	hasPragma := func(name string) bool {
		for _, p := range vals["_pragma"] {
			if strings.HasPrefix(strings.ToLower(strings.TrimSpace(p)), name) {
				return true
			}
		}
		return false
	}
	var add []string
	if !hasPragma("busy_timeout") && vals.Get("_busy_timeout") == "" && vals.Get("_timeout") == "" {
		add = append(add, "_pragma=busy_timeout(10000)")
	}
	if !hasPragma("journal_mode") && vals.Get("_journal_mode") == "" && vals.Get("_journal") == "" {
		add = append(add, "_pragma=journal_mode(WAL)")
	}
	if vals.Get("_txlock") == "" {
		add = append(add, "_txlock=immediate")
	}
	if len(add) == 0 {
		return path
	}
	if query != "" {
		return base + "?" + query + "&" + strings.Join(add, "&")
	}
	return base + "?" + strings.Join(add, "&")
}

// DB returns the store's database handle.
func (s *Store) DB() *sql.DB { return s.db }

// Dialect returns the store's SQL dialect.
func (s *Store) Dialect() Dialect { return s.cfg.Dialect }

// Table returns the outbox table's name.
func (s *Store) Table() string { return s.cfg.Table }

// Close closes the database if the store owns it ([Open]); a store made by
// [NewStore] leaves it open. It is safe to call more than once.
func (s *Store) Close() error {
	if !s.own {
		return nil
	}
	return s.db.Close()
}

func (s *Store) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.cfg.Timeout)
}

// Migrate creates the outbox table and its indexes if they do not exist. It
// is idempotent, and safe to run from several processes at once (on
// PostgreSQL it holds a transaction-scoped advisory lock). It blocks.
func (s *Store) Migrate(ctx context.Context) error {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("outbox: migrate %s: %w", s.cfg.Table, err)
	}
	defer tx.Rollback()
	if s.cfg.Dialect == Postgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, s.lockKey); err != nil {
			return fmt.Errorf("outbox: migrate %s: lock: %w", s.cfg.Table, err)
		}
	}
	for _, stmt := range s.q.migrate {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("outbox: migrate %s: %w", s.cfg.Table, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("outbox: migrate %s: %w", s.cfg.Table, err)
	}
	return nil
}

// Add writes rec to the outbox inside the caller's transaction tx, which
// must be a transaction on the store's database; the event is published only
// if tx commits. It returns the record's id: rec.ID, or a new uuidv7 when
// rec.ID is empty. Add does not commit or roll back tx.
//
// Add validates rec first ([Record.Validate]): errors wrap
// [facade.ErrBadTopic], [facade.ErrBadKey], [facade.ErrBadPayload] or
// [facade.ErrBadID]. Adding an id that is already in the table fails with
// the database's unique-violation error. Add is safe for concurrent use on
// different transactions.
func (s *Store) Add(ctx context.Context, tx *sql.Tx, rec Record) (string, error) {
	if tx == nil {
		return "", fmt.Errorf("%w: Add needs a transaction", ErrInvalidConfig)
	}
	if err := rec.Validate(); err != nil {
		return "", err
	}
	if rec.ID == "" {
		rec.ID = facade.NewID()
	}
	var headers any
	if len(rec.Headers) > 0 {
		b, err := json.Marshal(rec.Headers)
		if err != nil {
			return "", fmt.Errorf("%w: headers: %w", facade.ErrInvalidOption, err)
		}
		headers = string(b)
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if _, err := tx.ExecContext(ctx, s.q.insert, rec.ID, rec.Topic, rec.Key, string(rec.Payload), headers); err != nil {
		return "", fmt.Errorf("outbox: add %s: %w", rec.ID, err)
	}
	return rec.ID, nil
}

// AddMany writes recs to the outbox inside the caller's transaction tx, in
// statements of up to 1,000 rows, and returns their ids in order. It is
// [Store.Add] for many records: each is validated first and nothing is
// written when one is invalid (errors name the record's index). Records of
// one statement share their creation time and are then published in id
// order, which is their order when the ids are the default uuidv7s.
func (s *Store) AddMany(ctx context.Context, tx *sql.Tx, recs []Record) ([]string, error) {
	if tx == nil {
		return nil, fmt.Errorf("%w: AddMany needs a transaction", ErrInvalidConfig)
	}
	ids := make([]string, len(recs))
	args := make([]any, 0, 5*len(recs))
	for i, rec := range recs {
		if err := rec.Validate(); err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		if rec.ID == "" {
			rec.ID = facade.NewID()
		}
		ids[i] = rec.ID
		var headers any
		if len(rec.Headers) > 0 {
			b, err := json.Marshal(rec.Headers)
			if err != nil {
				return nil, fmt.Errorf("record %d: %w: headers: %w", i, facade.ErrInvalidOption, err)
			}
			headers = string(b)
		}
		args = append(args, rec.ID, rec.Topic, rec.Key, string(rec.Payload), headers)
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	const chunk = 1000
	for start := 0; start < len(recs); start += chunk {
		n := min(chunk, len(recs)-start)
		if _, err := tx.ExecContext(ctx, s.insertMany(n), args[5*start:5*(start+n)]...); err != nil {
			return nil, fmt.Errorf("outbox: add %d records: %w", n, err)
		}
	}
	return ids, nil
}

// insertMany returns the INSERT statement of n rows.
func (s *Store) insertMany(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(s.cfg.Table)
	if s.cfg.Dialect == SQLite {
		b.WriteString(" (id, topic, key, payload, headers, created_at, next_attempt_at) VALUES ")
	} else {
		b.WriteString(" (id, topic, key, payload, headers) VALUES ")
	}
	mark := "$"
	if s.cfg.Dialect == SQLite {
		mark = "?"
	}
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		for j := 1; j <= 5; j++ {
			if j > 1 {
				b.WriteByte(',')
			}
			b.WriteString(mark)
			b.WriteString(strconv.Itoa(5*i + j))
		}
		if s.cfg.Dialect == SQLite {
			b.WriteString(",")
			b.WriteString(sqliteNow)
			b.WriteString(",")
			b.WriteString(sqliteNow)
		}
		b.WriteByte(')')
	}
	return b.String()
}

// Claim claims up to n due pending records for worker for lease, oldest
// first (by creation time, then id), in one statement, and returns them in
// that order. Each claim counts an attempt. On PostgreSQL concurrent claimers
// skip each other's locked rows (FOR UPDATE SKIP LOCKED); on SQLite claims
// serialise. A record is claimed by at most one worker at a time. It blocks.
func (s *Store) Claim(ctx context.Context, worker string, n int, lease time.Duration) ([]*Entry, error) {
	if worker == "" || n <= 0 || lease <= 0 {
		return nil, fmt.Errorf("%w: Claim needs a worker, n > 0 and lease > 0", ErrInvalidConfig)
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx, s.q.claim, worker, lease.Milliseconds(), n)
	if err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	defer rows.Close()
	var out []*Entry
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, fmt.Errorf("outbox: claim: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	slices.SortFunc(out, func(a, b *Entry) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}

// MarkSent marks claimed entries sent and returns how many it marked: an
// entry whose claim is no longer held (same worker and attempt, see
// [Entry.ClaimedBy] and [Entry.Attempts]) is left as it is. It blocks.
func (s *Store) MarkSent(ctx context.Context, entries ...*Entry) (int64, error) {
	n, err := s.fenced(ctx, s.q.markSent, entries)
	if err != nil {
		return n, fmt.Errorf("outbox: mark sent: %w", err)
	}
	return n, nil
}

// ReleaseOptions say how [Store.Release] hands claims back.
type ReleaseOptions struct {
	// Delay: the records are due again after Delay (0: at once).
	Delay time.Duration
	// Reason, when not empty, is recorded as the records' last error.
	Reason string
	// Uncount takes back the attempt their claim counted: for records that
	// were not published at all, or found the event store unavailable.
	Uncount bool
}

// Release makes claimed entries pending again as opts say, and returns how
// many it released (entries whose claim is no longer held are left as they
// are). It blocks.
func (s *Store) Release(ctx context.Context, opts ReleaseOptions, entries ...*Entry) (int64, error) {
	uncount := 0
	if opts.Uncount {
		uncount = 1
	}
	var reason any
	if opts.Reason != "" {
		reason = truncate(opts.Reason)
	}
	n, err := s.fenced(ctx, s.q.release, entries, uncount, max(opts.Delay, 0).Milliseconds(), reason)
	if err != nil {
		return n, fmt.Errorf("outbox: release: %w", err)
	}
	return n, nil
}

// MarkError parks a claimed entry as [StatusError] with reason as its last
// error. Errors wrap [ErrLeaseLost] when the claim is no longer held. It
// blocks.
func (s *Store) MarkError(ctx context.Context, e *Entry, reason string) error {
	n, err := s.fenced(ctx, s.q.markError, []*Entry{e}, truncate(reason))
	if err != nil {
		return fmt.Errorf("outbox: mark error %s: %w", e.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("outbox: mark error %s: %w", e.ID, ErrLeaseLost)
	}
	return nil
}

// fenced runs a settling statement for entries, grouped by the worker that
// claimed them, and returns the rows it changed.
func (s *Store) fenced(ctx context.Context, query string, entries []*Entry, args ...any) (int64, error) {
	if len(entries) == 0 {
		return 0, nil
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	byWorker := make(map[string][]*Entry)
	for _, e := range entries {
		byWorker[e.ClaimedBy] = append(byWorker[e.ClaimedBy], e)
	}
	var total int64
	for worker, es := range byWorker {
		refs, err := claimRefs(s.cfg.Dialect, es)
		if err != nil {
			return total, err
		}
		res, err := s.db.ExecContext(ctx, query, append([]any{worker, refs}, args...)...)
		if err != nil {
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// RequeueExpired makes claimed records whose lease expired pending again (due
// at once), recording "lease of WORKER expired" as their last error; a record
// that already had maxAttempts attempts is parked as [StatusError] instead
// (maxAttempts <= 0: never). It returns how many it requeued and parked. It
// blocks.
func (s *Store) RequeueExpired(ctx context.Context, maxAttempts int) (requeued, parked int64, err error) {
	if maxAttempts <= 0 {
		maxAttempts = 1 << 30
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx, s.q.requeue, maxAttempts)
	if err != nil {
		return 0, 0, fmt.Errorf("outbox: requeue expired: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		if err := rows.Scan(&st); err != nil {
			return requeued, parked, fmt.Errorf("outbox: requeue expired: %w", err)
		}
		if Status(st) == StatusError {
			parked++
		} else {
			requeued++
		}
	}
	if err := rows.Err(); err != nil {
		return requeued, parked, fmt.Errorf("outbox: requeue expired: %w", err)
	}
	return requeued, parked, nil
}

// DeleteSent deletes up to limit sent records that were sent more than
// olderThan ago and returns how many it deleted. It blocks.
func (s *Store) DeleteSent(ctx context.Context, olderThan time.Duration, limit int) (int64, error) {
	if limit <= 0 {
		return 0, nil
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	res, err := s.db.ExecContext(ctx, s.q.deleteSent, max(olderThan, 0).Milliseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("outbox: delete sent: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("outbox: delete sent: %w", err)
	}
	return n, nil
}

// Get returns the record id. Errors wrap [ErrNotFound]. It blocks.
func (s *Store) Get(ctx context.Context, id string) (*Entry, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	e, err := scanEntry(s.db.QueryRowContext(ctx, s.q.get, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("outbox: %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: get %s: %w", id, err)
	}
	return e, nil
}

// RetryFailed makes parked ([StatusError]) records pending again, due at once
// with their attempts reset, and returns how many it changed; ids that are
// not parked are ignored. It blocks.
func (s *Store) RetryFailed(ctx context.Context, ids ...string) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	b, err := json.Marshal(ids)
	if err != nil {
		return 0, fmt.Errorf("outbox: retry failed: %w", err)
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	res, err := s.db.ExecContext(ctx, s.q.retryFailed, string(b))
	if err != nil {
		return 0, fmt.Errorf("outbox: retry failed: %w", err)
	}
	return res.RowsAffected()
}

// StoreStats is a snapshot of an outbox table, from [Store.Stats].
type StoreStats struct {
	// Pending counts records waiting to be published (including those
	// waiting out a retry backoff).
	Pending int64
	// Claimed counts records held by drainers.
	Claimed int64
	// Failed counts records parked as [StatusError].
	Failed int64
	// OldestUnsent is the creation time of the oldest pending or claimed
	// record, zero when there is none; OldestUnsentAge is its age by the
	// database's clock (the outbox's lag).
	OldestUnsent    time.Time
	OldestUnsentAge time.Duration
}

// Stats reads the counts of pending, claimed and parked records and the age
// of the oldest unsent one. The queries use the table's partial indexes. It
// blocks.
func (s *Store) Stats(ctx context.Context) (StoreStats, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	var st StoreStats
	var now time.Time
	err := s.db.QueryRowContext(ctx, s.q.stats).Scan(&st.Pending, &st.Claimed, &st.Failed,
		dbTime{&st.OldestUnsent}, dbTime{&now})
	if err != nil {
		return st, fmt.Errorf("outbox: stats: %w", err)
	}
	if !st.OldestUnsent.IsZero() {
		st.OldestUnsentAge = max(now.Sub(st.OldestUnsent), 0)
	}
	return st, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanEntry(sc scanner) (*Entry, error) {
	var (
		e                           Entry
		payload                     []byte
		headers, lastErr, claimedBy sql.NullString
		status                      string
	)
	err := sc.Scan(&e.ID, &e.Topic, &e.Key, &payload, &headers, &status, &e.Attempts, &lastErr, &claimedBy,
		dbTime{&e.LeaseUntil}, dbTime{&e.CreatedAt}, dbTime{&e.NextAttemptAt}, dbTime{&e.SentAt})
	if err != nil {
		return nil, err
	}
	e.Payload = payload
	e.Status = Status(status)
	e.LastErr = lastErr.String
	e.ClaimedBy = claimedBy.String
	if headers.Valid && headers.String != "" && headers.String != "null" {
		if err := json.Unmarshal([]byte(headers.String), &e.Headers); err != nil {
			return nil, fmt.Errorf("record %s: headers: %w", e.ID, err)
		}
	}
	return &e, nil
}

// truncate bounds an error text stored in last_err and makes it valid UTF-8
// without NUL bytes, which PostgreSQL's text refuses.
func truncate(s string) string {
	const maxErr = 2000
	if len(s) > maxErr {
		s = s[:maxErr] + "…"
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}
