package outbox

import (
	"errors"
	"strings"
	"testing"
)

// TestOpenNamesTheDriverPackage: a DSN whose driver the program does not
// link is refused with ErrDriverNotLinked, naming the package to import.
func TestOpenNamesTheDriverPackage(t *testing.T) {
	for _, tc := range []struct {
		dsn     string
		linked  []string
		wantErr error
		wantPkg string
	}{
		{"postgres://u@h/db", nil, ErrDriverNotLinked, "outbox/postgres"},
		{"postgres://u@h/db", []string{"sqlite"}, ErrDriverNotLinked, "outbox/postgres"},
		{"sqlite:app.db", []string{"pgx"}, ErrDriverNotLinked, "outbox/sqlite"},
		{"app.db", []string{"sqlite"}, nil, ""},
		{"postgresql://u@h/db", []string{"pgx", "sqlite"}, nil, ""},
	} {
		driverName, _, d, err := parseDSN(tc.dsn)
		if err != nil {
			t.Fatalf("%s: %v", tc.dsn, err)
		}
		err = driverLinked(tc.linked, driverName, d)
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("%s with %v linked: %v, want %v", tc.dsn, tc.linked, err, tc.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "github.com/eventhub/eventhub/"+tc.wantPkg) {
			t.Errorf("%s: %v does not name %s", tc.dsn, err, tc.wantPkg)
		}
	}
}
