package jetstream_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/jetstream"
)

// TestTTLNeedsStreamThatAllowsIt: the hub's own streams take per-message
// TTLs, turned on by the first publish with one (a stream that allows them
// costs every publish); on a stream made outside the hub without
// AllowMsgTTL a publish with a TTL is refused with a specific bad_request,
// and nothing is stored.
func TestTTLNeedsStreamThatAllowsIt(t *testing.T) {
	b, nc := newBus(t, jetstream.Config{})
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(t.Context(), njs.StreamConfig{Name: "OPS_TTL", Subjects: []string{"opttl.t", "opttl.t._k.*"}, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	_, err = b.Publish(t.Context(), "opttl.t", json.RawMessage(`1`), facade.PublishOptions{Key: "k", TTLSeconds: 5})
	if !errors.Is(err, facade.ErrInvalidOption) {
		t.Fatalf("ttl on a stream without AllowMsgTTL: %v, want bad_request", err)
	}
	s, err := js.Stream(t.Context(), "OPS_TTL")
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 0 {
		t.Fatalf("the refused publish stored %d messages", n)
	}
	allows := func() bool {
		t.Helper()
		ti, err := b.LookupTopic(t.Context(), "hub.ttl")
		if err != nil {
			t.Fatal(err)
		}
		info, err := ti.Stream.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return info.Config.AllowMsgTTL
	}
	pub(t, b, "hub.ttl", `0`, "k")
	if allows() {
		t.Fatal("the hub made its stream with per-message TTLs before any publish asked for one")
	}
	f, err := b.PublishAsync(t.Context(), "hub.ttl", json.RawMessage(`1`), facade.PublishOptions{Key: "k", TTLSeconds: 5})
	if err != nil {
		t.Fatalf("ttl on the hub's own stream: %v", err)
	}
	if _, err := f.Wait(t.Context()); err != nil {
		t.Fatalf("ttl on the hub's own stream: %v", err)
	}
	if !allows() {
		t.Fatal("a publish with a TTL stored on the hub's own stream without per-message TTLs")
	}
	if _, err := b.Publish(t.Context(), "hub.ttl", json.RawMessage(`2`), facade.PublishOptions{Key: "k", TTLSeconds: 5}); err != nil {
		t.Fatalf("second ttl publish: %v", err)
	}
}

// TestDeclareTopicDeleteMarkers: declaring deleteMarkerTTL for a topic
// whose stream exists without delete markers turns them on (with the
// roll-ups JetStream needs for them); a declaration without it leaves them.
func TestDeclareTopicDeleteMarkers(t *testing.T) {
	b, nc := newBus(t, jetstream.Config{})
	pub(t, b, "dm.t", `1`, "k")
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	markers := func() (time.Duration, bool) {
		t.Helper()
		name, err := js.StreamNameBySubject(t.Context(), "dm.t")
		if err != nil {
			t.Fatal(err)
		}
		s, err := js.Stream(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		c := s.CachedInfo().Config
		return c.SubjectDeleteMarkerTTL, c.AllowRollup
	}
	if ttl, _ := markers(); ttl != 0 {
		t.Fatalf("a stream made without deleteMarkerTTL has markers (%v)", ttl)
	}
	if _, created, err := b.Admin().DeclareTopic(t.Context(), jetstream.TopicConfig{Pattern: "dm.t", DeleteMarkerTTL: 2 * time.Second}); err != nil || created {
		t.Fatalf("declare: created %v, %v", created, err)
	}
	if ttl, rollup := markers(); ttl != 2*time.Second || !rollup {
		t.Fatalf("declared markers: ttl %v, roll-ups %v; want 2s, true", ttl, rollup)
	}
	if _, _, err := b.Admin().DeclareTopic(t.Context(), jetstream.TopicConfig{Pattern: "dm.t"}); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := markers(); ttl != 2*time.Second {
		t.Fatalf("a declaration without deleteMarkerTTL changed the markers to %v", ttl)
	}
}

// TestTTLOnFamilyStream: a configured family stream is the hub's too: the
// first publish with a TTL to one of its topics turns TTLs on for it.
func TestTTLOnFamilyStream(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "famttl.*", Stream: "FAMTTL"}}})
	pub(t, b, "famttl.a", `0`, "")
	if _, err := b.Publish(t.Context(), "famttl.b", json.RawMessage(`1`), facade.PublishOptions{TTLSeconds: 5}); err != nil {
		t.Fatalf("ttl on a family stream: %v", err)
	}
	if _, err := b.Publish(t.Context(), "famttl.a", json.RawMessage(`1`), facade.PublishOptions{TTLSeconds: 5}); err != nil {
		t.Fatalf("ttl on another topic of the family: %v", err)
	}
}
