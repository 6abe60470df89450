package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)
	fence     = regexp.MustCompile("(?s)```.*?```")
)

// slug is the anchor a heading gets: lower case, punctuation other than
// '-' and '_' dropped, spaces turned into '-'.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the anchors of the headings of a Markdown file.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(fence.ReplaceAllString(string(b), ""), -1) {
		base := slug(strings.ReplaceAll(m[1], "`", ""))
		s := base
		for n := 1; out[s]; n++ { // repeated headings get -1, -2, …
			s = base + "-" + strconv.Itoa(n)
		}
		out[s] = true
	}
	return out
}

// TestDocsLinksResolve: every relative link of README.md and docs/ names a
// file of the repository and, with #anchor, a heading of that file.
func TestDocsLinksResolve(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pages := append(docPages(t, root), "web/static/README.md")
	for _, page := range pages {
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(b), "")
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := filepath.Join(root, page)
			if file != "" {
				path = filepath.Join(filepath.Dir(path), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %s: no such file", page, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(t, path)[anchor] {
				t.Errorf("%s: link %s: %s has no heading with that anchor", page, target, file)
			}
		}
	}
}
