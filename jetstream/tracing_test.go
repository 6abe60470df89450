package jetstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
)

// deliverEvents returns the settlement event of each ended deliver span of
// topic, in the order they ended.
func deliverEvents(exp *tracetest.InMemoryExporter, topic string) []string {
	var out []string
	for _, s := range exp.GetSpans() {
		if s.Name == "deliver "+topic && len(s.Events) == 1 {
			out = append(out, s.Events[0].Name)
		}
	}
	return out
}

// tracedBus is a bus whose spans go to the exporter it returns.
func tracedBus(t *testing.T) (*jetstream.Bus, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	b, _ := newBus(t, jetstream.Config{TracerProvider: tp})
	return b, exp
}

// TestDeliverSpanSettlements: a deliver span ends once, with the event of
// how its delivery ended: released, expired, acked, handed back when the
// subscription stops; a failed publish's span records the error.
func TestDeliverSpanSettlements(t *testing.T) {
	b, exp := tracedBus(t)
	const topic = "trace.settle"
	pub(t, b, topic, `"a"`, "")
	got := make(chan facade.Delivery, 10)
	sub, err := b.Subscribe(t.Context(), topic, "g", func(_ context.Context, d facade.Delivery) error {
		got <- d
		return nil
	}, facade.SubscribeOptions{From: facade.FromEarliest, ManualAck: true, AckTimeoutMs: 300})
	if err != nil {
		t.Fatal(err)
	}
	next := func() facade.Delivery {
		t.Helper()
		select {
		case d := <-got:
			return d
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery")
			return nil
		}
	}
	want := func(events ...string) {
		t.Helper()
		testutil.CheckFor(t, 5*time.Second, func() error {
			if have := deliverEvents(exp, topic); !slices.Equal(have, events) {
				return fmt.Errorf("deliver spans ended with %v, want %v", have, events)
			}
			return nil
		})
	}
	if err := next().(facade.Releaser).Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	want("release")
	next() // left to expire
	want("release", "expired")
	if err := next().Ack(t.Context()); err != nil {
		t.Fatal(err)
	}
	want("release", "expired", "ack")
	pub(t, b, topic, `"b"`, "")
	next()
	if err := sub.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	want("release", "expired", "ack", "handed_back")

	seq := uint64(7)
	_, err = b.Publish(t.Context(), "trace.cas", json.RawMessage(`1`), facade.PublishOptions{Key: "k", ExpectedLastSeq: &seq})
	if !errors.Is(err, facade.ErrWrongLastSeq) {
		t.Fatalf("compare-and-set of a key without events at 7: %v", err)
	}
	for _, s := range exp.GetSpans() {
		if s.Name == "publish trace.cas" {
			if s.Status.Code != codes.Error || len(s.Events) != 1 || s.Events[0].Name != "exception" {
				t.Errorf("failed publish span: status %v, events %v", s.Status, s.Events)
			}
			return
		}
	}
	t.Error("no span of the failed publish")
}

// The deliver span of an event whose handler returned nil ends with the
// ack the bus sends for it.
func TestDeliverSpanEndsOnAutoAck(t *testing.T) {
	b, exp := tracedBus(t)
	const topic = "trace.autoack"
	pub(t, b, topic, `"a"`, "")
	sub, err := b.Subscribe(t.Context(), topic, "g", func(context.Context, facade.Delivery) error { return nil },
		facade.SubscribeOptions{From: facade.FromEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop(context.Background())
	testutil.CheckFor(t, 5*time.Second, func() error {
		if have := deliverEvents(exp, topic); !slices.Equal(have, []string{"ack"}) {
			return fmt.Errorf("deliver spans ended with %v, want [ack]", have)
		}
		return nil
	})
}
