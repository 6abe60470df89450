package auth

import (
	"slices"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestJWTPermissionEmptyAllowDeniesAll: a user JWT reads an empty allow
// list as "no limit", so the callout must turn "allow nothing" into a deny
// of everything.
func TestJWTPermissionEmptyAllowDeniesAll(t *testing.T) {
	p := jwtPermission(&server.SubjectPermission{Allow: []string{}, Deny: []string{"x"}})
	if len(p.Allow) != 0 || !slices.Equal([]string(p.Deny), []string{">"}) {
		t.Fatalf("empty allow list became %+v", p)
	}
	p = jwtPermission(&server.SubjectPermission{Allow: []string{"a"}, Deny: []string{"b"}})
	if !slices.Equal([]string(p.Allow), []string{"a"}) || !slices.Equal([]string(p.Deny), []string{"b"}) {
		t.Fatalf("lists became %+v", p)
	}
	if _, err := NewCallout(nil, "SUAxxxx"); err == nil {
		t.Fatal("a bad seed was accepted")
	}
}
