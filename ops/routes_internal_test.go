package ops

import (
	"os"
	"regexp"
	"testing"
)

// TestRoutesDocumented: every route of the table is in the tables of
// docs/http-api.md, and every route there is in the table.
func TestRoutesDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/http-api.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `((?:GET|POST|DELETE) /[a-z/-]*)").FindAllStringSubmatch(string(b), -1) {
		documented[m[1]] = true
	}
	inTable := map[string]bool{}
	for _, rt := range routes {
		inTable[rt.pattern] = true
		if !documented[rt.pattern] {
			t.Errorf("route %s is not in the tables of docs/http-api.md", rt.pattern)
		}
	}
	for p := range documented {
		if !inTable[p] {
			t.Errorf("docs/http-api.md lists %s, which is no route", p)
		}
	}
}
