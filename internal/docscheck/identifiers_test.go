package docscheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeVars are the variables the README's prose calls methods on, with
// the types they hold in its examples ("bus, err := jetstream.Open(…)").
var readmeVars = map[string][]string{
	"bus": {"jetstream.Bus", "facade.Bus"},
}

// externalPackages are the packages besides the module's own whose names the
// README's prose uses (nats.go's jetstream and nats), by import path.
var externalPackages = []string{
	"github.com/nats-io/nats.go",
	"github.com/nats-io/nats.go/jetstream",
}

var (
	fenced = regexp.MustCompile("(?s)```.*?```")
	// A code span that starts with a Go selector: pkg.Name, Type.Member or
	// variable.Method; the name after the dot exported.
	selector = regexp.MustCompile("`([A-Za-z][A-Za-z0-9]*)\\.([A-Z][A-Za-z0-9_]*)[^`]*`")
)

// TestDocIdentifiersResolve: the Go identifiers the prose of README.md and
// docs/*.md names in code spans (`facade.Delivery`, `bus.Subscribe`, `PublishOptions.Key`)
// exist: a package-qualified name is declared by a package of that name
// (the module's, or nats.go's), a member of a type or of a known variable is
// a method or field of it. Names the check cannot place (a variable of an
// example of another language, `js.Publish`) are left alone.
func TestDocIdentifiersResolve(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	idx := newIndex()
	if err := idx.addTree(root); err != nil {
		t.Fatal(err)
	}
	for _, path := range externalPackages {
		out, err := exec.Command("go", "list", "-f", "{{.Dir}}", path).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", path, err)
		}
		if err := idx.addDir(strings.TrimSpace(string(out))); err != nil {
			t.Fatal(err)
		}
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, path := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		for _, m := range selector.FindAllStringSubmatch(fenced.ReplaceAllString(string(text), ""), -1) {
			span, left, name := m[0], m[1], m[2]
			ok, known := idx.resolve(left, name)
			if !known {
				continue
			}
			checked++
			if !ok {
				t.Errorf("%s names %s, but %s.%s does not exist", rel, span, left, name)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no identifier of the docs was checked")
	}
}

// index holds the declarations of Go packages by package name: the
// package-level names, and each type's methods and fields (with those of the
// types it embeds).
type index struct {
	pkgs map[string][]*pkgDecls
}

type pkgDecls struct {
	names map[string]bool
	types map[string]*ast.TypeSpec
	// methods by receiver type name.
	methods map[string]map[string]bool
}

func newIndex() *index { return &index{pkgs: map[string][]*pkgDecls{}} }

// addTree adds every package under root except testdata, hidden and
// node_modules directories.
func (x *index) addTree(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if n := d.Name(); path != root && (n == "testdata" || n == "node_modules" || strings.HasPrefix(n, ".")) {
			return filepath.SkipDir
		}
		return x.addDir(path)
	})
}

// addDir adds the package of dir's non-test Go files, if any.
func (x *index) addDir(dir string) error {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	byName := map[string]*pkgDecls{}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		p := byName[f.Name.Name]
		if p == nil {
			p = &pkgDecls{names: map[string]bool{}, types: map[string]*ast.TypeSpec{}, methods: map[string]map[string]bool{}}
			byName[f.Name.Name] = p
			x.pkgs[f.Name.Name] = append(x.pkgs[f.Name.Name], p)
		}
		p.addFile(f)
	}
	return nil
}

func (p *pkgDecls) addFile(f *ast.File) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				p.names[d.Name.Name] = true
				continue
			}
			recv := typeName(d.Recv.List[0].Type)
			if p.methods[recv] == nil {
				p.methods[recv] = map[string]bool{}
			}
			p.methods[recv][d.Name.Name] = true
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					p.names[s.Name.Name] = true
					p.types[s.Name.Name] = s
				case *ast.ValueSpec:
					for _, n := range s.Names {
						p.names[n.Name] = true
					}
				}
			}
		}
	}
}

// typeName is the name of a receiver or embedded type: T, *T, T[P], pkg.T.
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.IndexExpr:
		return typeName(e.X)
	case *ast.IndexListExpr:
		return typeName(e.X)
	case *ast.SelectorExpr:
		return typeName(e.X) + "." + e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// resolve reports whether left.name exists, and whether left is something
// the index knows (a package, a type of the module, a README variable).
func (x *index) resolve(left, name string) (ok, known bool) {
	if types, isVar := readmeVars[left]; isVar {
		for _, t := range types {
			pkg, typ, _ := strings.Cut(t, ".")
			if x.hasMember(pkg, typ, name, 0) {
				return true, true
			}
		}
		return false, true
	}
	if pkgs := x.pkgs[left]; len(pkgs) > 0 && left[0] >= 'a' && left[0] <= 'z' {
		for _, p := range pkgs {
			if p.names[name] {
				return true, true
			}
		}
		return false, true
	}
	if left[0] < 'A' || left[0] > 'Z' {
		return false, false // a variable of an example: its type is unknown
	}
	for pkg, ps := range x.pkgs {
		for _, p := range ps {
			if p.types[left] == nil {
				continue
			}
			known = true
			if x.hasMember(pkg, left, name, 0) {
				return true, true
			}
		}
	}
	return false, known
}

// hasMember reports whether type pkg.typ has a method or field name, its
// own or that of a type it embeds.
func (x *index) hasMember(pkg, typ, name string, depth int) bool {
	if depth > 8 {
		return false
	}
	for _, p := range x.pkgs[pkg] {
		if p.methods[typ][name] {
			return true
		}
		ts := p.types[typ]
		if ts == nil {
			continue
		}
		var fields []*ast.Field
		switch t := ts.Type.(type) {
		case *ast.StructType:
			fields = t.Fields.List
		case *ast.InterfaceType:
			fields = t.Methods.List
		}
		for _, f := range fields {
			for _, n := range f.Names {
				if n.Name == name {
					return true
				}
			}
			if len(f.Names) > 0 {
				continue
			}
			// Embedded: T, *T or otherpkg.T.
			emb := typeName(f.Type)
			epkg, etyp, qualified := strings.Cut(emb, ".")
			if !qualified {
				epkg, etyp = pkg, emb
			}
			if x.hasMember(epkg, etyp, name, depth+1) {
				return true
			}
		}
	}
	return false
}
