package jetstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/jetstream"
)

// TestStoreLimitsAreTerminalErrors: a request a store limit refuses gets
// its own terminal code, not a retryable "internal" one.
func TestStoreLimitsAreTerminalErrors(t *testing.T) {
	b, nc := newBus(t, jetstream.Config{})
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// An operator's stream for the topic with tight limits: one group, two
	// events, new ones refused.
	if _, err := js.CreateStream(t.Context(), njs.StreamConfig{
		Name: "LIMITED", Subjects: []string{"lim.t", "lim.t._k.*"}, Storage: njs.MemoryStorage,
		MaxConsumers: 1, MaxMsgs: 2, Discard: njs.DiscardNew,
	}); err != nil {
		t.Fatal(err)
	}
	nop := func(context.Context, facade.Delivery) error { return nil }
	unsub, err := b.Subscribe(t.Context(), "lim.t", "first", nop, facade.SubscribeOptions{})
	if err != nil {
		t.Fatalf("first group: %v", err)
	}
	defer unsub.Stop(context.Background())
	if _, err := b.Subscribe(t.Context(), "lim.t", "second", nop, facade.SubscribeOptions{}); !errors.Is(err, facade.ErrLimitExceeded) {
		t.Fatalf("a group beyond MaxConsumers: %v, want limit_exceeded", err)
	}
	for range 2 {
		pub(t, b, "lim.t", `1`, "")
	}
	if _, err := b.Publish(t.Context(), "lim.t", json.RawMessage(`1`), facade.PublishOptions{}); !errors.Is(err, facade.ErrLimitExceeded) {
		t.Fatalf("an event beyond MaxMsgs with DiscardNew: %v, want limit_exceeded", err)
	}
}
