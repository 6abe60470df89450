package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/eventhub/eventhub/internal/testutil"
)

// TestSeedTypeScriptClients runs the seeds' EventClient and PromClient,
// copied unchanged into testdata/seedclients/src, under node against a real
// gateway: they must connect, subscribe, publish and have their automatic
// ACKs count, never knowing they talk to Go. scripts/node.sh installs and
// builds them (npm ci, tsc); without them the test fails with that command.
func TestSeedTypeScriptClients(t *testing.T) {
	script, err := filepath.Abs("testdata/seedclients/dist/smoke.js")
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: run scripts/node.sh (Debian: apt-get install nodejs npm)")
	}
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("the seed clients are not built: run scripts/node.sh (%v)", err)
	}
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
