package outbox_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/eventhub/eventhub/internal/pgtest"
	"github.com/eventhub/eventhub/internal/testutil"
	_ "github.com/eventhub/eventhub/outbox/postgres" // the tests open both databases
	_ "github.com/eventhub/eventhub/outbox/sqlite"
)

// TestMain shares one PostgreSQL server among the tests (each test gets a
// database of its own) and, after a passing run, checks that no goroutine of
// the drainer, the stores or the bus is left behind.
func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	if code == 0 {
		if err := testutil.CheckNoLeaks(10*time.Second, leakMarkers...); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// leakMarkers are frames of goroutines that must not outlive the tests.
var leakMarkers = []string{
	"github.com/eventhub/eventhub/",
	"database/sql.",
	"github.com/jackc/pgx",
	"github.com/nats-io/",
	"modernc.org/sqlite",
}
