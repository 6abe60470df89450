package hub_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
)

// TestNativeMemberTermIsDeadLettered: a native member of a hub group that
// terminates an event (+TERM) does not lose it: the hub dead-letters it,
// as it does an event that runs out of attempts (and that one only once).
func TestNativeMemberTermIsDeadLettered(t *testing.T) {
	h := jsHub(t)
	const topic, group = "jobs.run", "workers"
	// The group exists: a hub member made it, dead-lettered an event that
	// ran out of attempts, and left.
	sub, err := h.Bus.Subscribe(t.Context(), topic, group, func(context.Context, facade.Delivery) error {
		return errors.New("fails")
	}, facade.SubscribeOptions{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Bus.Publish(t.Context(), topic, []byte(`{"n":0}`), facade.PublishOptions{Key: "k0"}); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		got, err := h.Bus.LatestByKey(t.Context(), facade.DeadLetterTopic(topic), []string{"k0"})
		if err == nil && got["k0"] == nil {
			err = errors.New("no dead letter yet")
		}
		return err
	})
	if err := sub.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	rec, err := h.Bus.Publish(t.Context(), topic, []byte(`{"n":1}`), facade.PublishOptions{Key: "k1"})
	if err != nil {
		t.Fatal(err)
	}

	c := connectNative(t, h, mint(t, time.Minute, "subscribe:jobs.*"))
	cons, err := c.js.Consumer(t.Context(), streamOf(t, h, topic), jetstream.ConsumerName(group, topic, false))
	if err != nil {
		t.Fatalf("bind to the hub's group: %v", err)
	}
	batch, err := cons.Fetch(1, njs.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		n++
		if err := m.TermWithReason("cannot handle it"); err != nil {
			t.Fatal(err)
		}
	}
	if n != 1 {
		t.Fatalf("fetched %d events, want 1", n)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		got, err := h.Bus.LatestByKey(t.Context(), facade.DeadLetterTopic(topic), []string{"k1"})
		if err != nil {
			return err
		}
		dl := got["k1"]
		if dl == nil {
			return fmt.Errorf("no dead letter of the terminated event")
		}
		if dl.Headers["dlq_id"] != rec.ID || dl.Headers["dlq_group"] != group || !strings.Contains(dl.Headers["dlq_reason"], "terminated by a member: cannot handle it") {
			return fmt.Errorf("dead letter headers %v", dl.Headers)
		}
		return nil
	})
	// The advisories arrive in order: the hub's own termination of k0 was
	// seen before k1's, and gave no second dead letter.
	if n := storedIn(t, h, streamOf(t, h, facade.DeadLetterTopic(topic))); n != 2 {
		t.Fatalf("%d dead letters, want 2", n)
	}
}
