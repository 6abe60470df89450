package outbox_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/eventhub/eventhub/internal/pgtest"
	_ "github.com/eventhub/eventhub/outbox/postgres" // the tests open both databases
	_ "github.com/eventhub/eventhub/outbox/sqlite"
)

// TestMain shares one PostgreSQL server among the tests (each test gets a
// database of its own) and, after a passing run, checks that no goroutine of
// the drainer, the stores or the bus is left behind.
func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	if code == 0 {
		if err := checkNoLeaks(10 * time.Second); err != nil {
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

// checkNoLeaks polls until no goroutine other than this one runs code of
// leakMarkers, or the timeout passes.
func checkNoLeaks(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		leaked := leakedGoroutines()
		if len(leaked) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("leaked %d goroutines:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond) // polling interval, bounded by deadline
	}
}

func leakedGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 { // this goroutine
			continue
		}
		for _, m := range leakMarkers {
			if strings.Contains(g, m) && !strings.Contains(g, "outbox_test.checkNoLeaks") {
				out = append(out, g)
				break
			}
		}
	}
	return out
}
