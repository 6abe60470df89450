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

// imports the examples may use, by the name they use.
var imports = map[string]string{
	"context":    "context",
	"errors":     "errors",
	"json":       "encoding/json",
	"log":        "log",
	"time":       "time",
	"http":       "net/http",
	"strconv":    "strconv",
	"facade":     "github.com/eventhub/eventhub/facade",
	"jetstream":  "github.com/eventhub/eventhub/jetstream",
	"outbox":     "github.com/eventhub/eventhub/outbox",
	"client":     "github.com/eventhub/eventhub/client",
	"compaction": "github.com/eventhub/eventhub/compaction",
	"ops":        "github.com/eventhub/eventhub/ops",
	"projector":  "github.com/eventhub/eventhub/projector",
	"sql":        "database/sql",
	"idempotent": "github.com/eventhub/eventhub/idempotent",
	"mongo":      "github.com/eventhub/eventhub/outbox/mongo",
	"mdb":        "go.mongodb.org/mongo-driver/v2/mongo",
	"nats":       "github.com/nats-io/nats.go",
	"uuid":       "github.com/google/uuid",
}

// pageImports are the names a page uses for other packages than the
// README does: docs/keys.md writes to NATS with nats.go's jetstream.
var pageImports = map[string]map[string]string{
	"docs/keys.md": {
		"jetstream":  "github.com/nats-io/nats.go/jetstream",
		"eventhubjs": "github.com/eventhub/eventhub/jetstream",
	},
	"docs/tracing.md": {"sdktrace": "go.opentelemetry.io/otel/sdk/trace"},
}

var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// docPages returns README.md and docs/*.md, relative to root.
func docPages(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages := []string{"README.md"}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		pages = append(pages, filepath.ToSlash(rel))
	}
	return pages
}

// exampleProgram wraps each ```go block of a page in a function (with ctx
// in scope) of one main package, importing what the blocks use.
func exampleProgram(page string, blocks [][]string) string {
	names := map[string]string{}
	for n, p := range imports {
		names[n] = p
	}
	for n, p := range pageImports[page] {
		names[n] = p
	}
	var body strings.Builder
	used := map[string]bool{"context": true}
	for i, b := range blocks {
		fmt.Fprintf(&body, "func example%d(ctx context.Context) {\n%s}\n\n", i+1, b[1])
		for name := range names {
			if regexp.MustCompile(`\b` + name + `\.`).MatchString(b[1]) {
				used[name] = true
			}
		}
	}
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for name := range used {
		fmt.Fprintf(&src, "\t%s %q\n", name, names[name])
	}
	src.WriteString(")\n\nfunc main() {}\n\n")
	src.WriteString(body.String())
	return src.String()
}

// TestDocsGoExamplesCompile builds the ```go blocks of README.md and of
// each page of docs/, one program per page, against the module.
func TestDocsGoExamplesCompile(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	replace := map[string]string{}
	srcs := map[string]string{} // by package path
	var pkgs []string
	for _, page := range docPages(t, root) {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		blocks := goBlock.FindAllStringSubmatch(string(text), -1)
		if len(blocks) == 0 {
			if page == "README.md" {
				t.Fatal("README.md has no Go example")
			}
			continue
		}
		name := strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(page)
		file := filepath.Join(dir, name+".go")
		src := exampleProgram(page, blocks)
		if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		// Each page's examples are built as a package inside the module
		// (so that their imports resolve), without writing into the
		// source tree.
		pkg := "./internal/docscheck/docexample/" + name
		replace[filepath.Join(root, "internal", "docscheck", "docexample", name, "main.go")] = file
		srcs[pkg] = page + "\n" + numbered(src)
		pkgs = append(pkgs, pkg)
	}
	overlay, _ := json.Marshal(map[string]map[string]string{"Replace": replace})
	ovFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ovFile, overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, pkg := range pkgs {
		cmd := exec.Command("go", "build", "-overlay", ovFile, "-o", os.DevNull, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("the Go examples of %s do not compile:\n%s\n%s", pkg, out, srcs[pkg])
		}
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

// TestDocsConfigExamplesLoad: the configuration file examples of README.md
// and docs/ (```yaml blocks that start with "# eventhub -config") are files
// the hub accepts (unknown keys are errors).
func TestDocsConfigExamplesLoad(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, page := range docPages(t, root) {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range yamlBlock.FindAllStringSubmatch(string(text), -1) {
			n++
			path := filepath.Join(t.TempDir(), "eventhub.yaml")
			if err := os.WriteFile(path, []byte(b[1]), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := hub.LoadFile(path); err != nil {
				t.Errorf("%s, example %d: %v\n%s", page, i+1, err, b[1])
			}
		}
	}
	if n == 0 {
		t.Fatal("no page has a configuration example")
	}
}

// TestFlagTableStatesTokenMinimum: the table of flags says how long the
// static token must be, as -h and the example configuration do.
func TestFlagTableStatesTokenMinimum(t *testing.T) {
	page, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("at least %d characters", auth.MinStaticTokenLen)
	for l := range strings.SplitSeq(string(page), "\n") {
		if strings.HasPrefix(l, "| `-ws-token`") {
			if !strings.Contains(l, want) {
				t.Fatalf("the -ws-token row of docs/configuration.md does not say %q:\n%s", want, l)
			}
			return
		}
	}
	t.Fatal("docs/configuration.md has no -ws-token row")
}

// TestReferenceDifferencesLinked: the page of differences from the
// reference TypeScript implementation is linked from the protocol, HTTP API
// and production pages, where a reader who knows the reference starts.
func TestReferenceDifferencesLinked(t *testing.T) {
	if _, err := os.Stat("../../docs/reference-differences.md"); err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"protocol.md", "http-api.md", "production.md"} {
		b, err := os.ReadFile(filepath.Join("../../docs", page))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "(reference-differences.md)") {
			t.Errorf("docs/%s does not link reference-differences.md", page)
		}
	}
}
