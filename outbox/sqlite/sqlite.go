// Package sqlite links the SQLite driver (the pure-Go modernc.org/sqlite,
// database/sql driver name "sqlite") for the outbox. Import it, for its
// effect or for [Open], in the program that opens an SQLite outbox: package
// outbox itself links no database driver, so a service on PostgreSQL does not
// carry the SQLite engine, nor one on SQLite pgx.
//
//	import _ "github.com/eventhub/eventhub/outbox/sqlite"
//	store, err := outbox.Open(ctx, "sqlite:/var/lib/app/app.db")
package sqlite

import (
	"context"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/eventhub/eventhub/outbox"
)

// DriverName is the database/sql driver name this package links; open the
// *sql.DB of [outbox.NewStore] with it, and a DSN from [outbox.SQLiteDSN].
const DriverName = "sqlite"

// Open is [outbox.OpenConfig] for an SQLite database: path is a file path,
// or a sqlite: or file: DSN. It creates the outbox table if needed and
// returns a store that owns the database handle.
func Open(ctx context.Context, path string, cfg outbox.StoreConfig) (*outbox.Store, error) {
	cfg.Dialect = outbox.SQLite
	return outbox.OpenConfig(ctx, path, cfg)
}
