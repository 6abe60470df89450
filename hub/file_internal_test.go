package hub

import (
	"bytes"
	"errors"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/compaction"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/limits"
	"github.com/eventhub/eventhub/ops"
)

var update = flag.Bool("update", false, "rewrite deploy/hub/eventhub.example.yaml")

const examplePath = "../deploy/hub/eventhub.example.yaml"

const exampleHeader = `# eventhub's configuration file (eventhub -config FILE): every key with its
# default. Generated from the code by "go generate ./hub"; a test checks that
# it is up to date and that the hub loads it.
#
# Flags and environment variables (eventhub serve -h) override the file's
# values; "eventhub config" prints the configuration in force, secrets
# redacted. A key left out keeps its default, an unknown key is an error.
# Durations are written 250ms, 5s, 1m30s, 24h. A list of entries (topics,
# compactors, limits.rates, limits.principals) is followed by a
# commented-out entry with its keys.
`

// exampleFile renders the example: the defaults, documented by the doc
// comments of the configuration's Go fields.
func exampleFile(t *testing.T) []byte {
	t.Helper()
	docs := &fieldDocs{t: t, types: map[reflect.Type][]string{}}
	var b bytes.Buffer
	b.WriteString(exampleHeader)
	w := yamlWriter{b: &b, doc: docs.of}
	w.fields(reflect.ValueOf(DefaultConfig().WithDefaults()), 0)
	return b.Bytes()
}

// TestExampleConfigIsGenerated: deploy/hub/eventhub.example.yaml is what
// the code generates (go generate ./hub rewrites it), and loading it gives
// the configuration of no file at all.
func TestExampleConfigIsGenerated(t *testing.T) {
	want := exampleFile(t)
	if *update {
		if err := os.WriteFile(examplePath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not the generated example: run go generate ./hub\n%s", examplePath, firstDiff(string(got), string(want)))
	}
	loaded, err := LoadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := yamlOf(t, loaded.WithDefaults()), yamlOf(t, DefaultConfig().WithDefaults()); a != b {
		t.Fatalf("the example loads as a configuration other than the defaults:\n%s", firstDiff(a, b))
	}
	// Every key is in the example, commented-out list entries included.
	for _, key := range []string{"maxInflightPerSub:", "pattern:", "duplicateWindow:", "source:", "eventsBurst:", "subject:", "maxConcurrentReplays:", "calloutSeed:"} {
		if !bytes.Contains(got, []byte(key)) {
			t.Errorf("the example has no %s", key)
		}
	}
}

func yamlOf(t *testing.T, f Config) string {
	t.Helper()
	var b bytes.Buffer
	if err := f.WriteYAML(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + strconv.Itoa(i+1) + ":\n  have: " + x + "\n  want: " + y
		}
	}
	return ""
}

// fieldDocs reads the doc comments of struct fields from the module's
// source.
type fieldDocs struct {
	t     *testing.T
	mu    sync.Mutex
	types map[reflect.Type][]string // field index → doc
}

// goDocLink is a doc comment's link to a Go name ("[Config.Storage]").
var goDocLink = regexp.MustCompile(`\[([A-Za-z][\w.]*)\]`)

const modulePath = "github.com/eventhub/eventhub/"

func (d *fieldDocs) of(typ reflect.Type, field int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	docs, ok := d.types[typ]
	if !ok {
		docs = d.load(typ)
		d.types[typ] = docs
	}
	if field < len(docs) {
		return goDocLink.ReplaceAllString(docs[field], "$1")
	}
	return ""
}

func (d *fieldDocs) load(typ reflect.Type) []string {
	rel, ok := strings.CutPrefix(typ.PkgPath(), modulePath)
	if !ok {
		d.t.Fatalf("%s is not in the module", typ)
	}
	if typ.PkgPath() == modulePath+"hub" {
		rel = "hub"
	}
	dir := filepath.Join("..", rel)
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		d.t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			d.t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				ts, ok := spec.(*ast.TypeSpec)
				if !ok || ts.Name.Name != typ.Name() {
					continue
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					d.t.Fatalf("%s is not a struct", typ)
				}
				var docs []string
				for _, fl := range st.Fields.List {
					doc := fl.Doc.Text()
					if doc == "" {
						doc = fl.Comment.Text()
					}
					n := max(len(fl.Names), 1) // an embedded field has no name
					for i := range n {
						if i > 0 {
							doc = "" // "A and B …" is said once, above A
						}
						docs = append(docs, doc)
					}
				}
				if len(docs) != typ.NumField() {
					d.t.Fatalf("%s: %d fields in the source, %d in the type", typ, len(docs), typ.NumField())
				}
				return docs
			}
		}
	}
	d.t.Fatalf("no source for %s in %s", typ, dir)
	return nil
}

// TestFileRoundTrip: what WriteYAML writes, the loader reads back to the
// same configuration, lists and nested sections included.
func TestFileRoundTrip(t *testing.T) {
	f := DefaultConfig().WithDefaults()
	f.NATS.URL = "nats://a:4222,nats://b:4222"
	f.Server.AllowedHosts = []string{"hub.internal", "10.0.0.7"}
	f.Auth.JWT.Algorithms = []string{"RS256"}
	f.Bus.Topics = []jetstream.TopicConfig{{Pattern: "audit.>", Stream: "AUDIT", MaxAge: 36 * time.Hour, DuplicateWindow: 10 * time.Minute},
		{Pattern: "process.state", Compaction: true, RetentionDays: 1.5}}
	f.Compactors = []compaction.Config{{Source: "orders.state"}}
	f.Gateway.AllowedOrigins = []string{"https://app.example.com", "*"}
	f.Gateway.LivePending = 123
	f.Limits.Rates = []limits.RateRule{{Principal: "svc-*", Topic: "metrics.**", Events: 2.5, Class: "ingest: yes"}}
	f.Limits.Principals = []limits.PrincipalQuotas{{Subject: "admin", Quotas: limits.Quotas{Topics: -1}}}
	f.Projector.Projector.MinInterval = -1
	want := yamlOf(t, f)
	var back Config
	if err := decodeFile([]byte(want), &back); err != nil {
		t.Fatalf("%v\n%s", err, want)
	}
	if got := yamlOf(t, back); got != want {
		t.Fatalf("round trip differs:\n%s", firstDiff(got, want))
	}
	if back.Limits.Rates[0].Class != "ingest: yes" || back.Bus.Topics[1].RetentionDays != 1.5 {
		t.Fatalf("read back %+v %+v", back.Limits.Rates, back.Bus.Topics)
	}
}

// TestUnknownKeysAreNamed: a key the configuration does not have is refused
// with its path, at any depth, lists included.
func TestUnknownKeysAreNamed(t *testing.T) {
	for _, tc := range []struct{ yaml, key string }{
		{"gatway: {}\n", `"gatway"`},
		{"gateway:\n  maxInflight: 3\n", `"gateway.maxInflight"`},
		{"topics:\n  - pattern: a\n  - patern: b\n", `"topics[1].patern"`},
		{"limits:\n  principals:\n    - subject: x\n      topic: 3\n", `"limits.principals[0].topic"`},
		{"outbox:\n  logger: x\n", `"outbox.logger"`},
	} {
		f := DefaultConfig()
		err := decodeFile([]byte(tc.yaml), &f)
		if !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: %v, want %v naming %s", tc.yaml, err, ErrUnknownKey, tc.key)
		}
	}
	f := DefaultConfig()
	if err := decodeFile([]byte("# nothing set\n"), &f); err != nil {
		t.Fatalf("a file of comments: %v", err)
	}
}

// TestRedactedHidesSecrets: the printed configuration holds none of the
// secrets, and keeps what is not secret.
func TestRedactedHidesSecrets(t *testing.T) {
	f := DefaultConfig()
	f.Auth.Token = "static-token-0123456789"
	f.Auth.JWT.Secret = auth.Secret("jwt-secret-0123456789abcdef0123456789")
	f.NATS.Password = "nats-password-1"
	f.NATS.Token = "nats-token-1"
	f.NATS.CalloutSeed = "SAAGNATSCALLOUTSEED"
	f.NATS.URL = "nats://hub:url-password-1@n1:4222, nats://n2:4222"
	f.Outbox.DB = "postgres://app:db-password-1@db:5432/app?sslmode=disable&password=db-password-2"
	f.Tracing.Endpoint = "https://otel:otlp-password-1@collector:4318/v1/traces"
	out := yamlOf(t, f.Redacted())
	for _, secret := range []string{"static-token-0123456789", "jwt-secret-0123456789", "nats-password-1", "nats-token-1",
		"SAAGNATSCALLOUTSEED", "url-password-1", "db-password-1", "db-password-2", "otlp-password-1"} {
		if strings.Contains(out, secret) {
			t.Errorf("printed configuration shows %q", secret)
		}
	}
	for _, kept := range []string{"hub:REDACTED@n1:4222", "nats://n2:4222", "app:REDACTED@db:5432/app", "sslmode=disable", "otel:REDACTED@collector:4318"} {
		if !strings.Contains(out, kept) {
			t.Errorf("printed configuration lost %q:\n%s", kept, out)
		}
	}
	if got := DefaultConfig().Redacted(); got.Auth.Token != "" || got.NATS.Password != "" {
		t.Fatalf("unset secrets printed as set: %+v", got)
	}
	sqlite := DefaultConfig()
	sqlite.Outbox.DB = "/var/lib/app/outbox.db"
	if got := sqlite.Redacted().Outbox.DB; got != "/var/lib/app/outbox.db" {
		t.Fatalf("a SQLite path redacted to %q", got)
	}
}

// TestOpsConfigCoversOpsLimits: every limit of ops.Config (a value, not a
// hook or a client) has a key in the "ops:" section, so a new limit cannot
// be left out of the file.
func TestOpsConfigCoversOpsLimits(t *testing.T) {
	file := reflect.TypeFor[OpsConfig]()
	component := reflect.TypeFor[ops.Config]()
	for i := range component.NumField() {
		f := component.Field(i)
		switch f.Type.Kind() {
		case reflect.Func, reflect.Interface, reflect.Pointer:
			continue // hooks, clients, loggers
		}
		if f.Name == "Durability" || f.Name == "AuthorizeProbes" {
			continue // set by the hub
		}
		if _, ok := file.FieldByName(f.Name); !ok {
			t.Errorf("ops.Config.%s has no key in the configuration file", f.Name)
		}
	}
}
