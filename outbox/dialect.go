package outbox

import (
	"fmt"
	"strings"
)

// Dialect names the SQL database a [Store] runs on.
type Dialect string

// Supported dialects.
const (
	// Postgres is PostgreSQL (12 or newer) through the pgx driver
	// (database/sql driver name "pgx", linked by package outbox/postgres). Claims use FOR UPDATE SKIP LOCKED,
	// so drainers in several processes claim disjoint batches without
	// waiting for each other. Times are timestamptz from the server's clock.
	Postgres Dialect = "postgres"
	// SQLite is SQLite 3.42 or newer through modernc.org/sqlite (driver name
	// "sqlite", linked by package outbox/sqlite). SQLite has one writer at a time, so each claim is one
	// UPDATE ... RETURNING statement that serialises with the other writers.
	// Times are integer milliseconds since the Unix epoch.
	SQLite Dialect = "sqlite"
)

// DefaultTable is the outbox table's default name.
const DefaultTable = "eventhub_outbox"

// maxTableLen keeps the derived index names within PostgreSQL's 63 bytes.
const maxTableLen = 48

// validTable reports an error unless name is a plain SQL identifier: a letter
// or '_' followed by letters, digits or '_', at most 48 bytes. The name is
// used unquoted, so PostgreSQL folds it to lower case.
func validTable(name string) error {
	if name == "" || len(name) > maxTableLen {
		return fmt.Errorf("%w: table name %q: 1 to %d characters", ErrInvalidConfig, name, maxTableLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return fmt.Errorf("%w: table name %q: letters, digits and '_' only, not starting with a digit", ErrInvalidConfig, name)
		}
	}
	return nil
}

// queries are a store's SQL statements, with the table name filled in.
type queries struct {
	migrate     []string
	insert      string
	claim       string
	markSent    string
	release     string
	markError   string
	requeue     string
	deleteSent  string
	get         string
	stats       string
	retryFailed string
}

// entryColumns is the column list that scanEntry reads, in order.
const entryColumns = `id, topic, key, payload, headers, status, attempts, last_err, claimed_by, lease_until, created_at, next_attempt_at, sent_at`

// qualifiedEntryColumns is entryColumns with each column prefixed by alias.
func qualifiedEntryColumns(alias string) string {
	cols := strings.Split(entryColumns, ", ")
	for i, c := range cols {
		cols[i] = alias + "." + c
	}
	return strings.Join(cols, ", ")
}

func buildQueries(d Dialect, table string) queries {
	var q queries
	switch d {
	case Postgres:
		q = postgresQueries
	case SQLite:
		q = sqliteQueries
	}
	r := strings.NewReplacer("{T}", table)
	q.migrate = append([]string(nil), q.migrate...)
	for i := range q.migrate {
		q.migrate[i] = r.Replace(q.migrate[i])
	}
	for _, s := range []*string{&q.insert, &q.claim, &q.markSent, &q.release, &q.markError,
		&q.requeue, &q.deleteSent, &q.get, &q.stats, &q.retryFailed} {
		*s = r.Replace(*s)
	}
	return q
}

// pgClaims is the CTE of the fenced statements: $2 is a JSON object mapping
// each claimed id to its attempt number, parsed once (a one-row CTE) and
// probed per claimed row (jsonb keys are looked up by binary search). The
// statements scan the table's claimed rows, a set bounded by the drainers'
// batches. Joining the [id, attempts] pairs as rows instead is at the mercy
// of the planner: with statistics taken while few rows were claimed it
// nests the pairs inside the claimed rows, 400ms to mark 1,000 records sent.
const pgClaims = `WITH c AS MATERIALIZED (SELECT $2::jsonb AS m)
`

// PostgreSQL. The fenced statements (markSent, release, markError) name the
// claims they settle in $2 (see pgClaims) and the worker in $1: a statement settles a record only while it is still claimed
// by that worker with that attempt number, so a drainer whose lease expired
// cannot overwrite what another drainer did since.
var postgresQueries = queries{
	migrate: []string{
		`CREATE TABLE IF NOT EXISTS {T} (
	id              text        PRIMARY KEY,
	topic           text        NOT NULL,
	key             text        NOT NULL DEFAULT '',
	payload         json        NOT NULL,
	headers         json,
	status          text        NOT NULL DEFAULT 'pending'
	                CONSTRAINT {T}_status_check CHECK (status IN ('pending', 'claimed', 'sent', 'error')),
	attempts        integer     NOT NULL DEFAULT 0,
	last_err        text,
	claimed_by      text,
	lease_until     timestamptz,
	created_at      timestamptz NOT NULL DEFAULT statement_timestamp(),
	next_attempt_at timestamptz NOT NULL DEFAULT statement_timestamp(),
	sent_at         timestamptz
)`,
		`CREATE INDEX IF NOT EXISTS {T}_pending_idx ON {T} (created_at, id) WHERE status = 'pending'`,
		`CREATE INDEX IF NOT EXISTS {T}_claimed_idx ON {T} (lease_until) WHERE status = 'claimed'`,
		`CREATE INDEX IF NOT EXISTS {T}_sent_idx ON {T} (sent_at) WHERE status = 'sent'`,
		`CREATE INDEX IF NOT EXISTS {T}_error_idx ON {T} (created_at) WHERE status = 'error'`,
	},
	insert: `INSERT INTO {T} (id, topic, key, payload, headers) VALUES ($1, $2, $3, $4, $5)`,
	// One statement: lock up to $3 due pending rows, oldest first, skipping
	// rows other claimers hold, and claim them. The locking subquery is a
	// MATERIALIZED CTE joined on the primary key, so that it runs exactly
	// once: written as "WHERE id IN (SELECT ... LIMIT n FOR UPDATE SKIP
	// LOCKED)" the planner may pick a nested-loop semi-join that re-runs the
	// subquery for every outer row and claims far more than n rows
	// (TestStoreLifecycle/postgres catches it); "id = ANY(ARRAY(SELECT ...))"
	// runs once but, before the table has statistics, can filter every
	// pending row against the whole array (200ms for a claim of 1,000 out of
	// 10,000).
	claim: `WITH picked AS MATERIALIZED (
	SELECT id FROM {T}
	WHERE status = 'pending' AND next_attempt_at <= statement_timestamp()
	ORDER BY created_at, id
	LIMIT $3
	FOR UPDATE SKIP LOCKED)
UPDATE {T} AS o SET status = 'claimed', claimed_by = $1, attempts = o.attempts + 1,
	lease_until = statement_timestamp() + $2::bigint * interval '1 millisecond'
FROM picked
WHERE o.id = picked.id AND o.status = 'pending'
RETURNING ` + qualifiedEntryColumns("o"),
	markSent: pgClaims + `UPDATE {T} AS o SET status = 'sent', sent_at = statement_timestamp(), lease_until = NULL
FROM c WHERE o.status = 'claimed' AND o.claimed_by = $1 AND (c.m ->> o.id)::integer = o.attempts`,
	release: pgClaims + `UPDATE {T} AS o SET status = 'pending', claimed_by = NULL, lease_until = NULL,
	attempts = o.attempts - $3::integer,
	next_attempt_at = statement_timestamp() + $4::bigint * interval '1 millisecond',
	last_err = COALESCE($5::text, o.last_err)
FROM c WHERE o.status = 'claimed' AND o.claimed_by = $1 AND (c.m ->> o.id)::integer = o.attempts`,
	markError: pgClaims + `UPDATE {T} AS o SET status = 'error', lease_until = NULL, last_err = $3::text
FROM c WHERE o.status = 'claimed' AND o.claimed_by = $1 AND (c.m ->> o.id)::integer = o.attempts`,
	requeue: `UPDATE {T} SET
	status = CASE WHEN attempts >= $1::integer THEN 'error' ELSE 'pending' END,
	last_err = 'lease of ' || COALESCE(claimed_by, '?') || ' expired',
	claimed_by = CASE WHEN attempts >= $1::integer THEN claimed_by END,
	lease_until = NULL,
	next_attempt_at = statement_timestamp()
WHERE status = 'claimed' AND lease_until < statement_timestamp()
RETURNING status`,
	deleteSent: `WITH picked AS MATERIALIZED (
	SELECT id FROM {T}
	WHERE status = 'sent' AND sent_at < statement_timestamp() - $1::bigint * interval '1 millisecond'
	LIMIT $2
	FOR UPDATE SKIP LOCKED)
DELETE FROM {T} AS o USING picked WHERE o.id = picked.id`,
	get: `SELECT ` + entryColumns + ` FROM {T} WHERE id = $1`,
	stats: `SELECT
	(SELECT count(*) FROM {T} WHERE status = 'pending'),
	(SELECT count(*) FROM {T} WHERE status = 'claimed'),
	(SELECT count(*) FROM {T} WHERE status = 'error'),
	(SELECT min(m) FROM (
		SELECT min(created_at) AS m FROM {T} WHERE status = 'pending'
		UNION ALL
		SELECT min(created_at) FROM {T} WHERE status = 'claimed') AS o),
	statement_timestamp()`,
	retryFailed: `UPDATE {T} SET status = 'pending', attempts = 0, claimed_by = NULL,
	lease_until = NULL, next_attempt_at = statement_timestamp()
WHERE status = 'error' AND id IN (SELECT json_array_elements_text($1::json))`,
}

// sqliteNow is the current time in integer milliseconds.
const sqliteNow = `CAST(unixepoch('subsec') * 1000 AS INTEGER)`

// SQLite: the same statements with numbered parameters (?N) and integer
// millisecond times. Each is a single statement, so SQLite runs it as one
// write transaction: claims serialise with every other writer.
var sqliteQueries = queries{
	migrate: []string{
		`CREATE TABLE IF NOT EXISTS {T} (
	id              TEXT    NOT NULL PRIMARY KEY,
	topic           TEXT    NOT NULL,
	key             TEXT    NOT NULL DEFAULT '',
	payload         TEXT    NOT NULL,
	headers         TEXT,
	status          TEXT    NOT NULL DEFAULT 'pending'
	                CHECK (status IN ('pending', 'claimed', 'sent', 'error')),
	attempts        INTEGER NOT NULL DEFAULT 0,
	last_err        TEXT,
	claimed_by      TEXT,
	lease_until     INTEGER,
	created_at      INTEGER NOT NULL,
	next_attempt_at INTEGER NOT NULL,
	sent_at         INTEGER
)`,
		`CREATE INDEX IF NOT EXISTS {T}_pending_idx ON {T} (created_at, id) WHERE status = 'pending'`,
		`CREATE INDEX IF NOT EXISTS {T}_claimed_idx ON {T} (lease_until) WHERE status = 'claimed'`,
		`CREATE INDEX IF NOT EXISTS {T}_sent_idx ON {T} (sent_at) WHERE status = 'sent'`,
		`CREATE INDEX IF NOT EXISTS {T}_error_idx ON {T} (created_at) WHERE status = 'error'`,
	},
	insert: `INSERT INTO {T} (id, topic, key, payload, headers, created_at, next_attempt_at)
VALUES (?1, ?2, ?3, ?4, ?5, ` + sqliteNow + `, ` + sqliteNow + `)`,
	claim: `UPDATE {T} SET status = 'claimed', claimed_by = ?1, attempts = attempts + 1,
	lease_until = ` + sqliteNow + ` + ?2
WHERE status = 'pending' AND id IN (
	SELECT id FROM {T}
	WHERE status = 'pending' AND next_attempt_at <= ` + sqliteNow + `
	ORDER BY created_at, id
	LIMIT ?3)
RETURNING ` + entryColumns,
	markSent: `UPDATE {T} SET status = 'sent', sent_at = ` + sqliteNow + `, lease_until = NULL
WHERE status = 'claimed' AND claimed_by = ?1
	AND (id, attempts) IN (SELECT value->>0, value->>1 FROM json_each(?2))`,
	release: `UPDATE {T} SET status = 'pending', claimed_by = NULL, lease_until = NULL,
	attempts = attempts - ?3,
	next_attempt_at = ` + sqliteNow + ` + ?4,
	last_err = COALESCE(?5, last_err)
WHERE status = 'claimed' AND claimed_by = ?1
	AND (id, attempts) IN (SELECT value->>0, value->>1 FROM json_each(?2))`,
	markError: `UPDATE {T} SET status = 'error', lease_until = NULL, last_err = ?3
WHERE status = 'claimed' AND claimed_by = ?1
	AND (id, attempts) IN (SELECT value->>0, value->>1 FROM json_each(?2))`,
	requeue: `UPDATE {T} SET
	status = CASE WHEN attempts >= ?1 THEN 'error' ELSE 'pending' END,
	last_err = 'lease of ' || COALESCE(claimed_by, '?') || ' expired',
	claimed_by = CASE WHEN attempts >= ?1 THEN claimed_by END,
	lease_until = NULL,
	next_attempt_at = ` + sqliteNow + `
WHERE status = 'claimed' AND lease_until < ` + sqliteNow + `
RETURNING status`,
	deleteSent: `DELETE FROM {T} WHERE id IN (
	SELECT id FROM {T}
	WHERE status = 'sent' AND sent_at < ` + sqliteNow + ` - ?1
	LIMIT ?2)`,
	get: `SELECT ` + entryColumns + ` FROM {T} WHERE id = ?1`,
	stats: `SELECT
	(SELECT count(*) FROM {T} WHERE status = 'pending'),
	(SELECT count(*) FROM {T} WHERE status = 'claimed'),
	(SELECT count(*) FROM {T} WHERE status = 'error'),
	(SELECT min(m) FROM (
		SELECT min(created_at) AS m FROM {T} WHERE status = 'pending'
		UNION ALL
		SELECT min(created_at) FROM {T} WHERE status = 'claimed')),
	` + sqliteNow,
	retryFailed: `UPDATE {T} SET status = 'pending', attempts = 0, claimed_by = NULL,
	lease_until = NULL, next_attempt_at = ` + sqliteNow + `
WHERE status = 'error' AND id IN (SELECT value FROM json_each(?1))`,
}
