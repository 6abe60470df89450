package web_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventhub/eventhub/gateway"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/wire"
)

func TestMain(m *testing.M) {
	os.Exit(testutil.RunCheckingLeaks(m, 10*time.Second, "eventhub/gateway.", "eventhub/jetstream.", "eventhub/web"))
}

// serveHub starts an embedded NATS bus and a gateway with the static
// token behind an httptest.Server, and returns the gateway's ws:// URL.
func serveHub(t *testing.T, token string) string {
	t.Helper()
	bus, err := jetstream.Open(context.Background(), jetstream.OpenConfig{
		Server: jetstream.ServerConfig{DataDir: t.TempDir(), Port: -1},
	})
	if err != nil {
		t.Fatalf("open bus: %v", err)
	}
	t.Cleanup(func() { bus.Close() })
	gw, err := gateway.New(bus, gateway.Config{Token: token})
	if err != nil {
		t.Fatalf("gateway: %v", err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	// Registered last, so run first: sessions end before the server closes.
	t.Cleanup(func() {
		if err := gw.Close(); err != nil {
			t.Errorf("gateway close: %v", err)
		}
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
}

// clientPackage is what web/static/package.json says of the package.
type clientPackage struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Type    string `json:"type"`
	Types   string `json:"types"`
	Exports map[string]struct {
		Types   string `json:"types"`
		Default string `json:"default"`
	} `json:"exports"`
	Files []string `json:"files"`
}

func readClientPackage(t *testing.T) clientPackage {
	t.Helper()
	b, err := os.ReadFile("static/package.json")
	if err != nil {
		t.Fatal(err)
	}
	var p clientPackage
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("static/package.json: %v", err)
	}
	return p
}

// TestClientPackageVersionIsProtocolVersion: the package's major.minor is
// the protocol's version, and client.js exports the same PROTOCOL_VERSION.
func TestClientPackageVersionIsProtocolVersion(t *testing.T) {
	p := readClientPackage(t)
	if !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`).MatchString(p.Version) {
		t.Fatalf("package.json version %q: want major.minor.patch", p.Version)
	}
	if mm := p.Version[:strings.LastIndex(p.Version, ".")]; mm != wire.ProtocolVersion {
		t.Errorf("package.json version %s: major.minor %s, the protocol is %s", p.Version, mm, wire.ProtocolVersion)
	}
	js, err := os.ReadFile("static/client.js")
	if err != nil {
		t.Fatal(err)
	}
	if want := `export const PROTOCOL_VERSION = "` + wire.ProtocolVersion + `";`; !bytes.Contains(js, []byte(want)) {
		t.Errorf("client.js does not say %s", want)
	}
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Protocol version: **" + wire.ProtocolVersion + "**"; !bytes.Contains(doc, []byte(want)) {
		t.Errorf("docs/protocol.md does not say %q", want)
	}
}

// TestClientPackage builds the browser client's package with npm pack (no
// registry), installs the tarball in a new node project as the package
// README says, and runs the README's example under node against a real hub:
// it imports the package by name, publishes one event and receives it.
func TestClientPackage(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: run scripts/node.sh (Debian: apt-get install nodejs npm)")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal("npm is not installed: run scripts/node.sh (Debian: apt-get install npm)")
	}
	p := readClientPackage(t)
	if p.Type != "module" || p.Types != "./client.d.ts" || p.Exports["."].Default != "./client.js" || p.Exports["."].Types != "./client.d.ts" {
		t.Fatalf("package.json: want an ES module with exports and types of client.js and client.d.ts, got %+v", p)
	}
	readme, err := os.ReadFile("static/README.md")
	if err != nil {
		t.Fatal(err)
	}
	sh := codeBlock(t, readme, "sh")
	tarball := strings.TrimPrefix(p.Name, "@")
	tarball = strings.ReplaceAll(tarball, "/", "-") + "-" + p.Version + ".tgz"
	wantSh := []string{"npm pack ./web/static", "npm install ./" + tarball}
	if got := strings.Split(strings.TrimSpace(sh), "\n"); !slices.Equal(got, wantSh) {
		t.Fatalf("the package README's commands are %q, want %q", got, wantSh)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	npmEnv := append(os.Environ(),
		"npm_config_cache="+filepath.Join(tmp, "npm-cache"),
		"npm_config_offline=true", "npm_config_audit=false", "npm_config_fund=false",
		"npm_config_update_notifier=false", "npm_config_loglevel=warn")
	run := func(dir, name string, args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = dir, npmEnv
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return out
	}

	// The README's first command, from the root of the repository, into tmp.
	dist := filepath.Join(tmp, "dist")
	if err := os.Mkdir(dist, 0o755); err != nil {
		t.Fatal(err)
	}
	run("..", npm, "pack", "./web/static", "--pack-destination", dist)
	tgz := filepath.Join(dist, tarball)
	got := tarEntries(t, tgz)
	want := map[string]string{"package/package.json": "static/package.json", "package/README.md": "static/README.md",
		"package/client.js": "static/client.js", "package/client.d.ts": "static/client.d.ts"}
	if len(got) != len(want) {
		t.Errorf("the tarball holds %v, want exactly %v", keys(got), keys(want))
	}
	for entry, src := range want {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[entry], b) {
			t.Errorf("the tarball's %s is not web/%s", entry, src)
		}
	}

	// A new project installs it (the README's second command), with the
	// committed ws package as its WebSocket.
	proj := filepath.Join(tmp, "app")
	if err := os.Mkdir(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "package.json"), []byte(`{"name":"app","private":true,"type":"module"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tgz, filepath.Join(proj, tarball)); err != nil {
		t.Fatal(err)
	}
	run(proj, npm, "install", "./"+tarball)
	if err := os.CopyFS(filepath.Join(proj, "node_modules", "ws"), os.DirFS("../gateway/testdata/seedclients/node_modules/ws")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "example.js"), []byte(codeBlock(t, readme, "js")), 0o644); err != nil {
		t.Fatal(err)
	}

	url := serveHub(t, "s3cret")
	cmd := exec.CommandContext(ctx, node, "example.js")
	cmd.Dir = proj
	cmd.Env = append(os.Environ(), "EVENTHUB_URL="+url, "EVENTHUB_TOKEN=s3cret")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node example.js: %v\n%s", err, out)
	}
	if strings.TrimSpace(string(out)) != "true 42" {
		t.Fatalf("node example.js printed %q, want %q", out, "true 42")
	}

	// The key-value operations of the package: compare-and-set and delete.
	if err := os.WriteFile(filepath.Join(proj, "kv.js"), []byte(kvScript), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.CommandContext(ctx, node, "kv.js")
	cmd.Dir = proj
	cmd.Env = append(os.Environ(), "EVENTHUB_URL="+url, "EVENTHUB_TOKEN=s3cret")
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node kv.js: %v\n%s", err, out)
	}
	if want := `["wrong_last_seq",true,"k",null]`; strings.TrimSpace(string(out)) != want {
		t.Fatalf("node kv.js printed %q, want %q", out, want)
	}
}

// kvScript publishes a key with compare-and-set, fails to create it again
// (wrong_last_seq), deletes it at the position it read, and receives the
// tombstone.
const kvScript = `import { EventHubClient } from "@eventhub/client";
import WebSocket from "ws";

const hub = new EventHubClient(process.env.EVENTHUB_URL, { token: process.env.EVENTHUB_TOKEN, WebSocket, reconnect: false });
await hub.connect();
const out = [];
const first = await hub.publish("kv.pkg", { v: 1 }, { key: "k", expected_last_seq: 0 });
try {
  await hub.publish("kv.pkg", { v: 2 }, { key: "k", expected_last_seq: 0 });
  out.push("stored");
} catch (err) {
  out.push(err.code);
}
const tomb = await hub.deleteKey("kv.pkg", "k", { expected_last_seq: first.seq });
out.push(tomb.seq > first.seq);
const deleted = await new Promise((resolve) => {
  hub.subscribe("kv.pkg", "g", (e) => { if (e.deleted) resolve(e); }, { from: "earliest" });
});
out.push(deleted.key, deleted.payload);
console.log(JSON.stringify(out));
hub.close();
`

// codeBlock returns the one fenced block of lang in md.
func codeBlock(t *testing.T, md []byte, lang string) string {
	t.Helper()
	m := regexp.MustCompile("(?ms)^```"+lang+"\n(.*?)^```").FindAllSubmatch(md, -1)
	if len(m) != 1 {
		t.Fatalf("want one ```%s block, found %d", lang, len(m))
	}
	return string(m[0][1])
}

// tarEntries reads the files of a .tgz.
func tarEntries(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files := make(map[string][]byte)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}

func keys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
