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

// TestDocGoTestCommandsName tests that exist: every `go test` command a code
// span of README.md or docs/*.md gives with -bench or -fuzz names a package
// (of the main module, or of the e2e module, whose commands the docs say
// to run from e2e/) with at least one benchmark or fuzz test its pattern
// selects. The commands themselves run for minutes to half an hour, too
// long for the suite: this holds them to the code as it is renamed.
func TestDocGoTestCommandsName(t *testing.T) {
	if testing.Short() {
		t.Skip("builds test binaries")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, filepath.Join(root, "README.md"))
	checked := 0
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range goTestSpan.FindAllStringSubmatch(string(text), -1) {
			args := shellWords(m[1])[2:] // after "go test"
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
			t.Run(filepath.Base(doc)+" "+m[1], func(t *testing.T) {
				dir := root
				if _, err := os.Stat(filepath.Join(root, pkg)); err != nil {
					dir = filepath.Join(root, "e2e")
				}
				cmd := exec.Command("go", "test", "-list", pattern, pkg)
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("go test -list %s %s in %s: %v\n%s", pattern, pkg, dir, err, out)
				}
				for _, line := range strings.Split(string(out), "\n") {
					if strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "Fuzz") {
						return
					}
				}
				t.Errorf("%q selects no benchmark or fuzz test in %s:\n%s", pattern, pkg, out)
			})
		}
	}
	if checked == 0 {
		t.Fatal("found no go test command with -bench or -fuzz in the docs")
	}
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
