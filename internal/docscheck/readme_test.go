package docscheck

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/hub"
)

// imports the README's examples may use, by the name they use.
var imports = map[string]string{
	"context":    "context",
	"json":       "encoding/json",
	"log":        "log",
	"time":       "time",
	"facade":     "github.com/eventhub/eventhub/facade",
	"jetstream":  "github.com/eventhub/eventhub/jetstream",
	"outbox":     "github.com/eventhub/eventhub/outbox",
	"client":     "github.com/eventhub/eventhub/client",
	"sql":        "database/sql",
	"idempotent": "github.com/eventhub/eventhub/idempotent",
	"mongo":      "github.com/eventhub/eventhub/outbox/mongo",
	"mdb":        "go.mongodb.org/mongo-driver/v2/mongo",
}

var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// TestREADMEGoExamplesCompile wraps each ```go block of README.md in a
// function (with ctx in scope) and builds it against the module.
func TestREADMEGoExamplesCompile(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlock.FindAllStringSubmatch(string(readme), -1)
	if len(blocks) == 0 {
		t.Fatal("README.md has no Go example")
	}
	var body strings.Builder
	used := map[string]bool{"context": true}
	for i, b := range blocks {
		fmt.Fprintf(&body, "func example%d(ctx context.Context) {\n%s}\n\n", i+1, b[1])
		for name := range imports {
			if regexp.MustCompile(`\b` + name + `\.`).MatchString(b[1]) {
				used[name] = true
			}
		}
	}
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for name := range used {
		fmt.Fprintf(&src, "\t%s %q\n", name, imports[name])
	}
	src.WriteString(")\n\nfunc main() {}\n\n")
	src.WriteString(body.String())
	if out, err := buildExample(t, root, src.String()); err != nil {
		t.Fatalf("the README's Go examples do not compile:\n%s\n%s", out, numbered(src.String()))
	}
}

// buildExample builds src, a main package, inside the module (so that its
// imports resolve) without writing into the source tree; it returns the
// compiler's output.
func buildExample(t *testing.T, root, src string) ([]byte, error) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	// The example is built as a package inside the module (so that its
	// imports resolve), without writing into the source tree.
	target := filepath.Join(root, "internal", "docscheck", "readmeexample", "main.go")
	overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {target: file}})
	ovFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ovFile, overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-overlay", ovFile, "-o", os.DevNull, "./internal/docscheck/readmeexample")
	cmd.Dir = root
	return cmd.CombinedOutput()
}

// TestKeysCompareAndSetExampleCompiles: the compare-and-set example of
// docs/keys.md builds, with the variables its prose gives it (bus a
// *jetstream.Bus, key, next).
func TestKeysCompareAndSetExampleCompiles(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "keys.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Compare-and-set\n")
	if !ok {
		t.Fatal("docs/keys.md has no Compare-and-set section")
	}
	section, _, _ = strings.Cut(section, "\n### ")
	block := goBlock.FindStringSubmatch(section)
	if block == nil {
		t.Fatal("the Compare-and-set section of docs/keys.md has no Go example")
	}
	src := `package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/jetstream"
)

func main() {}

func example(ctx context.Context, bus *jetstream.Bus, key string, next json.RawMessage) error {
` + block[1] + `}
`
	if out, err := buildExample(t, root, src); err != nil {
		t.Fatalf("the compare-and-set example of docs/keys.md does not compile:\n%s\n%s", out, numbered(src))
	}
}

func numbered(s string) string {
	var b strings.Builder
	for i, l := range strings.Split(s, "\n") {
		fmt.Fprintf(&b, "%4d %s\n", i+1, l)
	}
	return b.String()
}

// TestDockerBuildContextLeavesOutLocalState: the image's build context
// must not carry a local data directory (events, possibly secrets) or the
// repository history.
func TestDockerBuildContextLeavesOutLocalState(t *testing.T) {
	b, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, want := range []string{".git", "data"} {
		if !lines[want] {
			t.Errorf(".dockerignore does not leave out %s", want)
		}
	}
}

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(# eventhub -config.*?)```")

// TestREADMEConfigExampleLoads: the README's configuration file example is
// one the hub accepts (unknown keys are errors).
func TestREADMEConfigExampleLoads(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := yamlBlock.FindAllStringSubmatch(string(readme), -1)
	if len(blocks) == 0 {
		t.Fatal("README.md has no configuration example")
	}
	for i, b := range blocks {
		path := filepath.Join(t.TempDir(), "eventhub.yaml")
		if err := os.WriteFile(path, []byte(b[1]), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := hub.LoadFile(path); err != nil {
			t.Errorf("example %d: %v\n%s", i+1, err, b[1])
		}
	}
}

// TestREADMEFlagTableStatesTokenMinimum: the README's table of flags says
// how long the static token must be, as -h and the example configuration do.
func TestREADMEFlagTableStatesTokenMinimum(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("at least %d characters", auth.MinStaticTokenLen)
	for l := range strings.SplitSeq(string(readme), "\n") {
		if strings.HasPrefix(l, "| `-ws-token`") {
			if !strings.Contains(l, want) {
				t.Fatalf("the README's -ws-token row does not say %q:\n%s", want, l)
			}
			return
		}
	}
	t.Fatal("the README has no -ws-token row")
}

// TestReferenceDifferencesLinked: the page of differences from the
// reference TypeScript implementation is linked from the protocol and ops
// pages, where a reader who knows the reference starts.
func TestReferenceDifferencesLinked(t *testing.T) {
	if _, err := os.Stat("../../docs/reference-differences.md"); err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"protocol.md", "ops.md", "operations.md"} {
		b, err := os.ReadFile(filepath.Join("../../docs", page))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "(reference-differences.md)") {
			t.Errorf("docs/%s does not link reference-differences.md", page)
		}
	}
}
