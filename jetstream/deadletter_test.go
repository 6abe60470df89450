package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
)

// TestDeadLetterOutageDoesNotStallMember: a dead-letter topic that does not
// answer (its stream deleted under the bus, and a plain NATS subscriber
// taking its publishes without a reply) holds the dead-letter copy of a
// failed event; the member meanwhile goes on delivering the topic's other
// events. When the dead-letter topic
// answers again, the dead letter is stored.
func TestDeadLetterOutageDoesNotStallMember(t *testing.T) {
	var logs testutil.Buffer
	b, nc := newBus(t, jetstream.Config{
		Logger:          slog.New(slog.NewTextHandler(&logs, nil)),
		RequestTimeout:  5 * time.Second,
		MaxRetryBackoff: 200 * time.Millisecond,
	})
	ctx := t.Context()
	const topic, dlq = "dlstall.t", "dlstall.t.dlq"
	pub(t, b, dlq, `0`, "") // the bus knows the dead-letter topic's stream
	ti, err := b.LookupTopic(ctx, dlq)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.JetStream().DeleteStream(ctx, ti.StreamName); err != nil {
		t.Fatal(err)
	}
	var swallowed atomic.Int64
	silent, err := nc.Subscribe(dlq, func(*nats.Msg) { swallowed.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	got := make(chan string, 16)
	// ManualAck: handlers run on the pull loop, one at a time, as a
	// WebSocket subscription's do; a failed one is settled there too.
	sub, err := b.Subscribe(ctx, topic, "g", func(hctx context.Context, dl facade.Delivery) error {
		p := string(dl.Event().Payload)
		if p == `"poison"` {
			return errors.New("cannot handle poison")
		}
		got <- p
		return dl.Ack(hctx)
	}, facade.SubscribeOptions{MaxAttempts: 1, ManualAck: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop(context.Background())

	pub(t, b, topic, `"poison"`, "")
	for i := range 3 {
		pub(t, b, topic, fmt.Sprintf(`%d`, i), "")
	}
	seen := map[string]bool{}
	testutil.CheckFor(t, 10*time.Second, func() error {
		for {
			select {
			case p := <-got:
				seen[p] = true
			default:
				if len(seen) < 3 {
					return fmt.Errorf("delivered %v of 3 events after the poison one", seen)
				}
				return nil
			}
		}
	})
	// The member did not wait for the copy: it had not ended (failed or
	// been stored) when the other events were delivered.
	if l := logs.String(); strings.Contains(l, "dead-letter publish failed") || strings.Contains(l, "event dead-lettered") {
		t.Fatalf("the dead-letter copy ended before the other events were delivered:\n%s", l)
	}
	// The copy is sent from a goroutine of its own: it reaches the
	// dead-letter subject, and waits there for an answer.
	testutil.CheckFor(t, 10*time.Second, func() error {
		if swallowed.Load() == 0 {
			return errors.New("no dead-letter copy reached the dead-letter subject")
		}
		return nil
	})

	// The dead-letter topic answers again (no one takes its subject, so the
	// bus provisions its stream anew): the dead letter is stored.
	if err := silent.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 20*time.Second, func() error {
		n, err := b.Admin().TopicCount(ctx, dlq)
		if err != nil || n != 1 {
			return fmt.Errorf("dead letters stored: %d, %v", n, err)
		}
		return nil
	})
}
