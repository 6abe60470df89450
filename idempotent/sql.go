package idempotent

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/outbox"
)

// DefaultTable is the default table of [SQL] marks.
const DefaultTable = "eventhub_processed"

// TxHandler processes one event inside tx, the transaction that also
// records the event as processed: whatever it writes through tx commits
// together with the mark, or not at all. It must not commit or roll back
// tx. e is shared: do not modify it.
type TxHandler func(ctx context.Context, tx *sql.Tx, e *facade.EventRecord) error

// SQLConfig configures an [SQL] store.
type SQLConfig struct {
	// Dialect is the database's: outbox.Postgres or outbox.SQLite.
	Dialect outbox.Dialect
	// Table holds the marks (default [DefaultTable]): letters, digits and
	// '_', at most 48 bytes.
	Table string
	// TxOptions are the options of the handler's transactions (nil:
	// the database's default isolation).
	TxOptions *sql.TxOptions
}

var tableRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

// Validate reports the first invalid setting, wrapping [ErrInvalidConfig].
func (c SQLConfig) Validate() error {
	if c.Dialect != outbox.Postgres && c.Dialect != outbox.SQLite {
		return fmt.Errorf("%w: dialect %q: want %q or %q", ErrInvalidConfig, c.Dialect, outbox.Postgres, outbox.SQLite)
	}
	if c.Table != "" && !tableRE.MatchString(c.Table) {
		return fmt.Errorf("%w: table %q: want letters, digits and _, at most 48 bytes", ErrInvalidConfig, c.Table)
	}
	return nil
}

// SQL keeps the marks of processed events in a table, (group, event id) as
// its primary key, written in the handler's own transaction. It is safe
// for concurrent use, by any number of goroutines and processes. It
// borrows its *sql.DB and never closes it.
type SQL struct {
	db   *sql.DB
	cfg  SQLConfig
	mark string
	hook hook
}

// NewSQL returns a store on db, a database of cfg.Dialect (for SQLite,
// opened as outbox.SQLiteDSN says: busy timeout, WAL, immediate
// transactions). It does no I/O: call [SQL.Migrate].
func NewSQL(db *sql.DB, cfg SQLConfig) (*SQL, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	s := &SQL{db: db, cfg: cfg}
	if cfg.Dialect == outbox.Postgres {
		s.mark = `INSERT INTO ` + cfg.Table + ` (grp, event_id, topic, processed_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`
	} else {
		s.mark = `INSERT INTO ` + cfg.Table + ` (grp, event_id, topic, processed_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`
	}
	return s, nil
}

// Migrate creates the marks table and its index if they do not exist. It
// is idempotent and blocks.
func (s *SQL) Migrate(ctx context.Context) error {
	stmts := []string{
		`CREATE TABLE IF NOT EXISTS ` + s.cfg.Table + ` (
	grp TEXT NOT NULL,
	event_id TEXT NOT NULL,
	topic TEXT NOT NULL,
	processed_at BIGINT NOT NULL,
	PRIMARY KEY (grp, event_id))`,
		`CREATE INDEX IF NOT EXISTS ` + s.cfg.Table + `_at ON ` + s.cfg.Table + ` (processed_at)`,
	}
	for _, q := range stmts {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("idempotent: migrate %s: %w", s.cfg.Table, err)
		}
	}
	return nil
}

// Wrap returns a handler for a group subscription that runs h at most once
// per event id and group, in a transaction with the mark:
//
//  1. begin; insert the mark (group, id); if it is already there, the
//     event was processed: roll back, acknowledge, done;
//  2. h(ctx, tx, event); an error rolls back and nacks the delivery;
//  3. commit, then acknowledge.
//
// Inserting the mark first makes a concurrent copy of the event (a
// redelivery while the first delivery still runs) wait for the first
// transaction and then find its mark (PostgreSQL: on the primary key's
// lock; SQLite: one writer at a time). A crash before the commit leaves
// nothing; after it, the redelivery is acknowledged without running h.
func (s *SQL) Wrap(h TxHandler) facade.Handler {
	return func(ctx context.Context, d facade.Delivery) error {
		if _, err := s.process(ctx, d, h); err != nil {
			return err
		}
		return d.Ack(ctx)
	}
}

// errAbandoned marks a delivery a hook abandoned: it is not settled.
type errAbandoned struct{ err error }

func (e errAbandoned) Error() string { return e.err.Error() }
func (e errAbandoned) Unwrap() error { return e.err }

// process runs the transaction of one delivery and reports whether h ran.
func (s *SQL) process(ctx context.Context, d facade.Delivery, h TxHandler) (bool, error) {
	e := d.Event()
	tx, err := s.db.BeginTx(ctx, s.cfg.TxOptions)
	if err != nil {
		return false, fmt.Errorf("idempotent: begin: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, s.mark, d.Group(), e.ID, e.Topic, time.Now().UnixMilli())
	if err != nil {
		return false, fmt.Errorf("idempotent: mark %s: %w", e.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("idempotent: mark %s: %w", e.ID, err)
	}
	if n == 0 {
		return false, nil // processed before
	}
	if err := h(ctx, tx, e); err != nil {
		return false, err
	}
	if err := s.at("written", e); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("idempotent: commit %s: %w", e.ID, err)
	}
	if err := s.at("committed", e); err != nil {
		return false, err
	}
	return true, nil
}

func (s *SQL) at(stage string, e *facade.EventRecord) error {
	if s.hook == nil {
		return nil
	}
	if err := s.hook(stage, e); err != nil {
		return errAbandoned{err}
	}
	return nil
}

// Processed reports whether the event id was processed by group. It
// blocks.
func (s *SQL) Processed(ctx context.Context, group, id string) (bool, error) {
	q := `SELECT 1 FROM ` + s.cfg.Table + ` WHERE grp = ? AND event_id = ?`
	if s.cfg.Dialect == outbox.Postgres {
		q = `SELECT 1 FROM ` + s.cfg.Table + ` WHERE grp = $1 AND event_id = $2`
	}
	var one int
	err := s.db.QueryRowContext(ctx, q, group, id).Scan(&one)
	if err == sql.ErrNoRows {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("idempotent: processed %s: %w", id, err)
	}
	return true, nil
}

// Prune deletes the marks older than olderThan and returns how many it
// deleted. Keep marks longer than any copy of an event can arrive (see the
// package documentation). It blocks.
func (s *SQL) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	q := `DELETE FROM ` + s.cfg.Table + ` WHERE processed_at < ?`
	if s.cfg.Dialect == outbox.Postgres {
		q = `DELETE FROM ` + s.cfg.Table + ` WHERE processed_at < $1`
	}
	res, err := s.db.ExecContext(ctx, q, time.Now().Add(-olderThan).UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("idempotent: prune: %w", err)
	}
	return res.RowsAffected()
}
