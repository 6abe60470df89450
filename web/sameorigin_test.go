package web_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestSameOriginPathRefusesOtherOrigins: the dashboard and the console take
// their ops base and WebSocket path from the query string (?ops=, ?ws=)
// only when it is a path of the page's own origin. A value the browser's
// URL parser turns into another origin ("/\t/evil.example": tabs and
// newlines are dropped, leaving "//evil.example") would send the token the
// user enters to that origin. Runs the pages' sameOriginPath in node.
func TestSameOriginPathRefusesOtherOrigins(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: run scripts/node.sh (Debian: apt-get install nodejs)")
	}
	fn := regexp.MustCompile(`(?ms)^export function sameOriginPath\(v\) \{.*?^\}`)
	cases := map[string]bool{ // value → accepted
		"/ops": true, "/ops/": true, "/ws": true, "/%09/x": true,
		"": false, "ops": false, "//evil.example": false, "/\\evil.example": false,
		"/\t/evil.example": false, "/\n/evil.example/ws": false, "/\r/evil.example": false,
		"http://evil.example/ws": false,
	}
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	// Both pages use the one sameOriginPath of sameorigin.js.
	for _, page := range []string{"static/dashboard.js", "static/console.js"} {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), `import { sameOriginPath } from "./sameorigin.js";`) {
			t.Errorf("%s does not import sameOriginPath from sameorigin.js", page)
		}
	}
	src, err := os.ReadFile("static/sameorigin.js")
	if err != nil {
		t.Fatal(err)
	}
	f := fn.Find(src)
	if f == nil {
		t.Fatal("sameorigin.js: no sameOriginPath")
	}
	script := `const location = {href: "http://127.0.0.1:8081/console", origin: "http://127.0.0.1:8081"};
` + strings.TrimPrefix(string(f), "export ") + `
const cases = ` + string(in) + `;
let bad = 0;
for (const [v, want] of Object.entries(cases)) {
  const got = sameOriginPath(v) !== null;
  if (got !== want) { console.log(JSON.stringify(v) + ": accepted " + got + ", want " + want); bad++; }
}
process.exit(bad ? 1 : 0);`
	if out, err := exec.Command(node, "-e", script).CombinedOutput(); err != nil {
		t.Errorf("sameorigin.js: %v\n%s", err, out)
	}
}
