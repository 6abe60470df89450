// Package postgres links the PostgreSQL driver (pgx, database/sql driver name
// "pgx") for the outbox. Import it, for its effect or for [Open], in the
// program that opens a PostgreSQL outbox: package outbox itself links no
// database driver, so a service on SQLite does not carry pgx, nor one on
// PostgreSQL the SQLite engine.
//
//	import _ "github.com/eventhub/eventhub/outbox/postgres"
//	store, err := outbox.Open(ctx, "postgres://app@db/app")
package postgres

import (
	"context"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/eventhub/eventhub/outbox"
)

// DriverName is the database/sql driver name this package links; open the
// *sql.DB of [outbox.NewStore] with it.
const DriverName = "pgx"

// Open is [outbox.OpenConfig] for a postgres:// or postgresql:// DSN: it
// connects, creates the outbox table if needed and returns a store that owns
// the connection pool. It blocks until the database answers or ctx ends.
func Open(ctx context.Context, dsn string, cfg outbox.StoreConfig) (*outbox.Store, error) {
	cfg.Dialect = outbox.Postgres
	return outbox.OpenConfig(ctx, dsn, cfg)
}
