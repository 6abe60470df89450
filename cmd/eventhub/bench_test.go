package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/eventhub/eventhub/bench"
	"github.com/eventhub/eventhub/hub"
)

// TestBenchAgainstEmbeddedHub runs `eventhub bench` briefly with each way
// in against an in-process hub, with a group of consumers: the JSON
// summary counts what was published and consumed, and the progress lines
// come out on stderr.
func TestBenchAgainstEmbeddedHub(t *testing.T) {
	h, err := hub.Start(t.Context(), hub.Config{Memory: true, NATSPort: 0, OpsPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Shutdown(t.Context()) })
	urls := []string{"-ws", "ws://" + h.Addr("ws"), "-http", "http://" + h.Addr("http"), "-nats", h.Bus.Server().ClientURL()}
	for _, tr := range []string{bench.TransportWS, bench.TransportHTTP, bench.TransportNATS} {
		t.Run(tr, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{"bench", "-transport", tr, "-topic", "bench." + tr, "-publishers", "2", "-consumers", "2",
				"-size", "256", "-duration", "1500ms", "-progress", "300ms", "-json"}, urls...)
			if err := run(t.Context(), args, env(nil), &out, &errOut); err != nil {
				t.Fatalf("%v\n%s", err, errOut.String())
			}
			var s bench.Summary
			if err := json.Unmarshal(out.Bytes(), &s); err != nil {
				t.Fatalf("summary %q: %v", out.String(), err)
			}
			if s.Published == 0 || s.Errors != 0 || s.Consumed == 0 || s.P50Ms <= 0 || s.P99Ms < s.P50Ms || s.Size != 256 {
				t.Fatalf("summary %+v", s)
			}
			// Every event published in the run reaches the group once,
			// give or take those in flight when the run ended.
			if s.Consumed > s.Published+2 { // the 2 publishes in flight at the end are stored, not counted
				t.Fatalf("consumed %d of %d published", s.Consumed, s.Published)
			}
			if !strings.Contains(errOut.String(), "ev/s") || !strings.Contains(errOut.String(), "p99") {
				t.Fatalf("no progress line:\n%s", errOut.String())
			}
		})
	}
	t.Run("rate and text", func(t *testing.T) {
		var out, errOut bytes.Buffer
		args := append([]string{"bench", "-rate", "100", "-publishers", "2", "-duration", "1s", "-progress", "-1s"}, urls...)
		if err := run(t.Context(), args, env(nil), &out, &errOut); err != nil {
			t.Fatalf("%v\n%s", err, errOut.String())
		}
		var n int
		_, rest, _ := strings.Cut(out.String(), "published ")
		if _, err := fmt.Sscan(rest, &n); err != nil || n < 60 || n > 130 {
			t.Fatalf("at 100 ev/s for 1s published %d (%v):\n%s", n, err, out.String())
		}
	})
	t.Run("bad transport", func(t *testing.T) {
		err := run(t.Context(), []string{"bench", "-transport", "carrier-pigeon"}, env(nil), &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "transport") {
			t.Fatalf("err %v", err)
		}
	})
}
