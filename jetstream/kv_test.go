package jetstream_test

import (
	"encoding/json"
	"errors"
	"testing"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/jetstream"
)

// TestTTLNeedsStreamThatAllowsIt: the hub's own streams take per-message
// TTLs; on a stream made without AllowMsgTTL a publish with a TTL is
// refused with a specific bad_request, and nothing is stored.
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
	if _, err := b.Publish(t.Context(), "hub.ttl", json.RawMessage(`1`), facade.PublishOptions{Key: "k", TTLSeconds: 5}); err != nil {
		t.Fatalf("ttl on the hub's own stream: %v", err)
	}
}
