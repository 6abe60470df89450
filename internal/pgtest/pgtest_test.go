package pgtest_test

import (
	"database/sql"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eventhub/eventhub/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func open(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Each Start gives a database of its own on the shared server.
func TestStartGivesSeparateDatabases(t *testing.T) {
	ctx := t.Context()
	a, b := open(t, pgtest.Start(t)), open(t, pgtest.Start(t))
	if _, err := a.ExecContext(ctx, `CREATE TABLE x (v int); INSERT INTO x VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := a.QueryRowContext(ctx, `SELECT count(*) FROM x`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("count = %d, %v; want 1", n, err)
	}
	// The table is not in the other database.
	if _, err := b.ExecContext(ctx, `SELECT * FROM x`); err == nil {
		t.Fatal("table x visible in the second database")
	}
	var dbA, dbB string
	if err := a.QueryRowContext(ctx, `SELECT current_database()`).Scan(&dbA); err != nil {
		t.Fatal(err)
	}
	if err := b.QueryRowContext(ctx, `SELECT current_database()`).Scan(&dbB); err != nil {
		t.Fatal(err)
	}
	if dbA == dbB || !strings.HasPrefix(dbA, "t_teststartgivesseparatedatabases_") {
		t.Fatalf("databases %q and %q", dbA, dbB)
	}
}

// A server of its own starts, serves, and is gone after Stop.
func TestServerStop(t *testing.T) {
	srv, err := pgtest.StartServer()
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			srv.Stop()
		}
	})
	dsn, err := srv.CreateDatabase(t.Context(), "Some/Test Name")
	if err != nil {
		t.Fatal(err)
	}
	db := open(t, dsn)
	var v string
	if err := db.QueryRowContext(t.Context(), `SHOW fsync`).Scan(&v); err != nil || v != "off" {
		t.Fatalf("fsync = %q, %v", v, err)
	}
	db.Close()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if err := srv.Stop(); err != nil { // idempotent
		t.Fatal(err)
	}
	if _, err := os.Stat(srv.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("server dir still there: %v", err)
	}
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(srv.Port()), time.Second)
	if err == nil {
		c.Close()
		t.Fatal("port still accepts connections after Stop")
	}
}

// Missing binaries are an error naming the install command, never a skip.
func TestMissingBinariesNameInstallCommand(t *testing.T) {
	t.Setenv(pgtest.BinDirEnv, t.TempDir())
	_, err := pgtest.FindBinDir()
	if !errors.Is(err, pgtest.ErrNotInstalled) {
		t.Fatalf("err = %v, want ErrNotInstalled", err)
	}
	if !strings.Contains(err.Error(), "apt-get install -y postgresql") {
		t.Fatalf("error does not name the install command: %v", err)
	}
	if _, err := pgtest.StartServer(); !errors.Is(err, pgtest.ErrNotInstalled) {
		t.Fatalf("StartServer err = %v, want ErrNotInstalled", err)
	}
}

func TestFindBinDir(t *testing.T) {
	dir, err := pgtest.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(dir + "/" + b); err != nil {
			t.Fatal(err)
		}
	}
}
