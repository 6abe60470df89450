package token

import "testing"

func TestMatches(t *testing.T) {
	d := Of("static-token-0123456789")
	for _, c := range []struct {
		got  string
		want bool
	}{
		{"static-token-0123456789", true},
		{"static-token-012345678", false},
		{"static-token-01234567890", false},
		{"", false},
		{"STATIC-TOKEN-0123456789", false},
	} {
		if d.Matches(c.got) != c.want {
			t.Errorf("Matches(%q) = %v, want %v", c.got, !c.want, c.want)
		}
	}
}
