package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventhub/eventhub/internal/testutil"
)

// TestSeedTypeScriptClients runs the reference TypeScript clients
// (EventClient and PromClient), kept unchanged in testdata/seedclients/src,
// under node against a real gateway: they must connect, subscribe, publish
// and have their automatic ACKs count, never knowing they talk to Go. Their
// compiled JavaScript and the one package it needs at run time (ws, pinned)
// are committed, so the test needs node and nothing from the npm registry;
// scripts/seedclients.sh rebuilds them after a source change.
func TestSeedTypeScriptClients(t *testing.T) {
	script, err := filepath.Abs("testdata/seedclients/dist/smoke.js")
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: run scripts/node.sh (Debian: apt-get install nodejs)")
	}
	checkSeedClientsBuilt(t)
	bus := newBus(t)
	const token = "seed-clients-token"
	g := newGateway(t, bus, Config{Token: token})
	suffix := fmt.Sprint(time.Now().UnixNano())

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, script, g.url, token, suffix)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("seed clients: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var out struct {
		Event struct {
			IDs      []string `json:"ids"`
			Received []int    `json:"received"`
		} `json:"event"`
		Prom struct {
			Received []int `json:"received"`
		} `json:"prom"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("output %q: %v", stdout.String(), err)
	}
	slices.Sort(out.Event.Received)
	slices.Sort(out.Prom.Received)
	if len(out.Event.IDs) != 10 || !slices.Equal(out.Event.Received, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("EventClient published %d, received %v", len(out.Event.IDs), out.Event.Received)
	}
	if !slices.Equal(out.Prom.Received, []int{0, 1, 2}) {
		t.Fatalf("PromClient received %v", out.Prom.Received)
	}
	// Their automatic ACKs counted: both groups' cursors reached the end.
	for topic, want := range map[string]uint64{"seed.event." + suffix: 10, "seed.prom." + suffix: 3} {
		group := map[bool]string{true: "g1", false: "g2"}[topic == "seed.event."+suffix]
		testutil.CheckFor(t, 10*time.Second, func() error {
			cur, err := bus.GetCursor(t.Context(), topic, group)
			if err != nil {
				return err
			}
			if cur.LastSeq != want || cur.Pending != 0 {
				return fmt.Errorf("%s/%s cursor %+v, want seq %d", topic, group, *cur, want)
			}
			return nil
		})
	}
}

// checkSeedClientsBuilt fails when the committed JavaScript was not rebuilt
// from the TypeScript sources as they are now, or when the committed ws is
// not the version package.json pins.
func checkSeedClientsBuilt(t *testing.T) {
	t.Helper()
	const dir = "testdata/seedclients"
	sums, err := os.ReadFile(filepath.Join(dir, "dist", "SOURCES.sha256"))
	if err != nil {
		t.Fatalf("the compiled clients are missing: run scripts/seedclients.sh (%v)", err)
	}
	want := map[string]string{}
	for line := range strings.Lines(string(sums)) {
		sum, name, ok := strings.Cut(strings.TrimSpace(line), "  ")
		if ok {
			want[name] = sum
		}
	}
	srcs, err := filepath.Glob(filepath.Join(dir, "src", "*.ts"))
	if err != nil || len(srcs) == 0 {
		t.Fatalf("no TypeScript sources in %s/src (%v)", dir, err)
	}
	for _, src := range srcs {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(src)
		if got := fmt.Sprintf("%x", sha256.Sum256(b)); want[name] != got {
			t.Fatalf("%s changed since dist/ was built: run scripts/seedclients.sh and commit dist/", name)
		}
		delete(want, name)
	}
	if len(want) > 0 {
		t.Fatalf("dist/SOURCES.sha256 names sources that are gone: %v; run scripts/seedclients.sh", want)
	}
	var pkg struct {
		Version      string            `json:"version"`
		Dependencies map[string]string `json:"dependencies"`
	}
	readJSON := func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v: run scripts/seedclients.sh", err)
		}
		if err := json.Unmarshal(b, &pkg); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	readJSON(filepath.Join(dir, "package.json"))
	pinned := pkg.Dependencies["ws"]
	readJSON(filepath.Join(dir, "node_modules", "ws", "package.json"))
	if pinned == "" || pkg.Version != pinned {
		t.Fatalf("committed ws is %q, package.json pins %q: run scripts/seedclients.sh", pkg.Version, pinned)
	}
}
