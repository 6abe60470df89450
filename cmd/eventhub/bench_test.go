package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/bench"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
)

// TestBenchAgainstEmbeddedHub runs `eventhub bench` briefly with each way
// in against an in-process hub, with a group of consumers: the JSON
// summary counts what was published and consumed, and the progress lines
// come out on stderr.
func TestBenchAgainstEmbeddedHub(t *testing.T) {
	h, err := hub.Start(t.Context(), hub.Config{NATS: hub.NATSConfig{Memory: true, Port: 0}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Shutdown(t.Context()) })
	urls := []string{"-ws", "ws://" + h.Addr("ws"), "-http", "http://" + h.Addr("http"), "-nats", h.Bus.Server().ClientURL(),
		"-ops", "http://" + h.Addr("ops")}
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
			// The run created the topic and its group: both are gone.
			if _, err := h.Bus.JetStream().StreamNameBySubject(t.Context(), "bench."+tr); err == nil {
				t.Fatalf("the run left its topic behind:\n%s", errOut.String())
			}
			if !strings.Contains(errOut.String(), "deleted the topic bench."+tr) {
				t.Fatalf("the run does not say it deleted its topic:\n%s", errOut.String())
			}
		})
	}
	t.Run("group on an existing topic", func(t *testing.T) {
		if _, err := h.Bus.Publish(t.Context(), "bench.kept", []byte(`1`), facade.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
		var errOut bytes.Buffer
		args := append([]string{"bench", "-topic", "bench.kept", "-consumers", "1", "-group", "g1", "-duration", "300ms", "-progress", "-1s"}, urls...)
		if err := run(t.Context(), args, env(nil), &bytes.Buffer{}, &errOut); err != nil {
			t.Fatalf("%v\n%s", err, errOut.String())
		}
		if n, err := h.Bus.Admin().TopicCount(t.Context(), "bench.kept"); err != nil || n < 2 {
			t.Fatalf("the topic that was there before holds %d events (%v)", n, err)
		}
		if _, err := h.Bus.GetCursor(t.Context(), "bench.kept", "g1"); !errors.Is(err, facade.ErrNotFound) {
			t.Fatalf("the group the run created: %v, want ErrNotFound", err)
		}
		// With -keep, the group stays.
		args = append(args, "-keep")
		if err := run(t.Context(), args, env(nil), &bytes.Buffer{}, &errOut); err != nil {
			t.Fatalf("%v\n%s", err, errOut.String())
		}
		if _, err := h.Bus.GetCursor(t.Context(), "bench.kept", "g1"); err != nil {
			t.Fatalf("the group of a -keep run: %v", err)
		}
	})
	t.Run("admin API refused", func(t *testing.T) {
		h := startHubWithToken(t)
		args := []string{"bench", "-topic", "bench.x", "-duration", "300ms", "-token", "not-the-token-0123",
			"-ws", "ws://" + h.Addr("ws"), "-ops", "http://" + h.Addr("ops")}
		err := run(t.Context(), args, env(nil), &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "admin scope") || !strings.Contains(err.Error(), "-keep") {
			t.Fatalf("err %v, want one saying what cleanup needs", err)
		}
	})
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

func startHubWithToken(t *testing.T) *hub.Hub {
	t.Helper()
	h, err := hub.Start(t.Context(), hub.Config{NATS: hub.NATSConfig{Memory: true, Port: -1}, Auth: auth.Config{Token: "static-token-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Shutdown(t.Context()) })
	return h
}
