package docscheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goTestSpan is a `go test …` command in a code span of the prose.
var goTestSpan = regexp.MustCompile("`(go test [^`]+)`")

// tooLongToRun are the `go test` commands of the prose that run for many
// minutes or without end: they are only held to the code (their pattern
// must select a benchmark or fuzz test of their package), with the reason.
var tooLongToRun = map[string]string{
	"go test -run '^$' -bench . -benchtime 20000x ./jetstream":                  "every bus benchmark, about a quarter of an hour",
	"go test -run '^$' -bench . -benchtime 1x ./client":                         "every WebSocket benchmark, minutes",
	"go test -run '^$' -bench 'ReplayExport$' -benchtime 1x -timeout 30m ./ops": "exports a million events, up to half an hour",
	"go test -fuzz FuzzValid ./internal/jsonvalid":                              "fuzzes until stopped; the suite replays its corpus",
}

// TestDocGoTestCommands runs the `go test` commands with -bench or -fuzz
// that code spans of README.md and docs/*.md give, as written, in the
// repository or, for the e2e module's packages, in e2e/ (as the docs say
// to run them). The ones in tooLongToRun are only checked to select a
// benchmark or fuzz test of their package, so that a rename does not
// leave the prose behind.
func TestDocGoTestCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds test binaries and runs benchmarks")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, page := range docPages(t, root) {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range goTestSpan.FindAllStringSubmatch(string(text), -1) {
			command := m[1]
			args := shellWords(command)[2:] // after "go test"
			pattern, pkg := "", ""
			for i, a := range args {
				switch {
				case (a == "-bench" || a == "-fuzz") && i+1 < len(args):
					pattern = args[i+1]
				case strings.HasPrefix(a, "./"):
					pkg = a
				}
			}
			if pattern == "" || pkg == "" || strings.HasSuffix(pkg, "...") {
				continue // the suite itself, run by .ci/run
			}
			checked++
			t.Run(filepath.Base(page)+" "+command, func(t *testing.T) {
				dir := root
				if _, err := os.Stat(filepath.Join(root, pkg)); err != nil {
					dir = filepath.Join(root, "e2e")
				}
				if why, ok := tooLongToRun[command]; ok {
					t.Logf("not run (%s): checking that %q selects a benchmark or fuzz test", why, pattern)
					out := goTest(t, dir, "-list", pattern, pkg)
					for _, line := range strings.Split(out, "\n") {
						if strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "Fuzz") {
							return
						}
					}
					t.Errorf("%q selects no benchmark or fuzz test in %s:\n%s", pattern, pkg, out)
					return
				}
				out := goTest(t, dir, args...)
				if !strings.Contains(out, "\nBenchmark") && !strings.HasPrefix(out, "Benchmark") {
					t.Errorf("%s ran no benchmark:\n%s", command, out)
				}
			})
		}
	}
	if checked == 0 {
		t.Fatal("found no go test command with -bench or -fuzz in the docs")
	}
	for command := range tooLongToRun {
		found := false
		for _, page := range docPages(t, root) {
			text, _ := os.ReadFile(filepath.Join(root, page))
			found = found || strings.Contains(string(text), "`"+command+"`")
		}
		if !found {
			t.Errorf("tooLongToRun names %q, which no page gives any more", command)
		}
	}
}

// goTest runs go test with args in dir and returns its output; a failure
// fails t.
func goTest(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"test"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// shellWords splits s into words as a shell would for the docs' commands:
// on spaces, with single quotes grouping.
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	quoted, in := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted = !quoted
			in = true
		case r == ' ' && !quoted:
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}
