package outbox_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDriversLiveInTheirOwnPackages: importing outbox (or a package built
// on it) links no database driver; outbox/postgres links pgx only and
// outbox/sqlite the SQLite engine only.
func TestDriversLiveInTheirOwnPackages(t *testing.T) {
	const mod = "github.com/eventhub/eventhub/"
	for _, tc := range []struct {
		pkg        string
		pgx, sqlit bool
	}{
		{"outbox", false, false},
		{"outbox/mongo", false, false},
		{"idempotent", false, false},
		{"metrics", false, false},
		{"outbox/postgres", true, false},
		{"outbox/sqlite", false, true},
		{"hub", true, true}, // the binary drains either
	} {
		out, err := exec.Command("go", "list", "-deps", mod+tc.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", tc.pkg, err, out)
		}
		deps := string(out)
		if got := strings.Contains(deps, "github.com/jackc/pgx/"); got != tc.pgx {
			t.Errorf("%s links pgx: %v, want %v", tc.pkg, got, tc.pgx)
		}
		if got := strings.Contains(deps, "modernc.org/sqlite\n"); got != tc.sqlit {
			t.Errorf("%s links modernc.org/sqlite: %v, want %v", tc.pkg, got, tc.sqlit)
		}
	}
}
