package ops_test

import (
	"encoding/json"
	"testing"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/ops"
)

// TestRedriveStaysOnItsTopic: a redrive publishes to the topic whose
// dead-letter topic was named, never to one a dead letter's dlq_topic
// header names. Whoever may publish to orders.created.dlq can write that
// header; a redrive that followed it would publish into payments.refund
// for them.
func TestRedriveStaysOnItsTopic(t *testing.T) {
	e := newEnv(t, jetstream.Config{}, ops.Config{})
	publish(t, e.bus, "orders.created", `1`, "")
	publish(t, e.bus, "payments.refund", `0`, "")
	if _, err := e.bus.Publish(t.Context(), "orders.created.dlq", json.RawMessage(`{"refund":1000000}`),
		facade.PublishOptions{Headers: map[string]string{"dlq_topic": "payments.refund", "dlq_group": "billing"}}); err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	e.mustCall(t, "POST", "/admin/deadletters/redrive?topic=orders.created&all=true", &out)
	if n, err := e.bus.TopicCount(t.Context(), "payments.refund"); err != nil || n != 1 {
		t.Fatalf("payments.refund holds %d events (%v) after a redrive of orders.created, want 1; answer %v", n, err, out)
	}
	if n, err := e.bus.TopicCount(t.Context(), "orders.created"); err != nil || n != 2 {
		t.Fatalf("orders.created holds %d events (%v) after the redrive, want 2", n, err)
	}
}
