//go:build unix

package jetstream_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/benchcmp"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/jetstream"
)

// BenchmarkTracing: publish and consume+ack of 128-byte events through a
// bus without tracing ("hub") and through one that traces every event
// ("traced": an SDK provider batching spans to an exporter that drops
// them), beside raw nats.go, on one server in one run. traced/hub is the
// cost of tracing; hub/raw is to be read against the same figure of the
// benchmarks without tracing (BenchmarkPublishSyncLatency,
// BenchmarkConsumeAck).
func BenchmarkTracing(b *testing.B) {
	srv := natstest.RunEmbedded(b)
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	newBus := func(tp *sdktrace.TracerProvider) *jetstream.Bus {
		cfg := jetstream.Config{PublishAsyncMaxPending: benchWindow}
		if tp != nil {
			cfg.TracerProvider = tp
		}
		bus, err := jetstream.New(natstest.InProcessConn(b, srv), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = bus.Close() })
		return bus
	}
	off, on := newBus(nil), newBus(tp)
	js, err := njs.New(natstest.InProcessConn(b, srv), njs.WithPublishAsyncMaxPending(benchWindow))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, njs.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}, Storage: njs.FileStorage}); err != nil {
		b.Fatal(err)
	}
	data := payloadOf(128)
	publish := func(bus *jetstream.Bus, topic string) func(int) {
		return func(n int) {
			for range n {
				if _, err := bus.Publish(ctx, topic, data, facade.PublishOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("publish", func(b *testing.B) {
		compareAll(b, "msgs",
			contestant{Name: "raw", Run: func(n int) {
				for range n {
					if _, err := js.Publish(ctx, "raw.sync", data); err != nil {
						b.Fatal(err)
					}
				}
			}},
			contestant{Name: "hub", Run: publish(off, "bench.off")},
			contestant{Name: "traced", Run: publish(on, "bench.on")},
		)
	})
	b.Run("consume-ack", func(b *testing.B) {
		// Each round reads the first n events of its topic with a new
		// group: every topic holds them before the clock starts (n as
		// compareAll computes it, 3 contestants).
		rounds := max(b.N/2000/6, 1) * 6
		n := max(b.N/rounds, 200)
		for range n {
			_, _ = js.PublishMsgAsync(&nats.Msg{Subject: "raw.consume", Data: data})
			_, _ = off.PublishAsync(ctx, "consume.off", data, facade.PublishOptions{})
			_, _ = on.PublishAsync(ctx, "consume.on", data, facade.PublishOptions{})
		}
		<-js.PublishAsyncComplete()
		<-off.JetStream().PublishAsyncComplete()
		<-on.JetStream().PublishAsyncComplete()
		round := 0
		consume := func(bus *jetstream.Bus, topic string) func(int) {
			return func(n int) {
				round++
				group := fmt.Sprintf("g%d", round)
				sub := benchcmp.ConsumeN(ctx, b, bus, topic, group, n)
				waitHubAckFloor(ctx, b, bus, topic, group, n)
				_ = sub.Stop(ctx)
			}
		}
		compareAll(b, "msgs",
			contestant{Name: "raw", Run: func(n int) {
				round++
				rawConsume(b, js, fmt.Sprintf("raw%d", round), "raw.consume", n)
			}},
			contestant{Name: "hub", Run: consume(off, "consume.off")},
			contestant{Name: "traced", Run: consume(on, "consume.on")},
		)
	})
}
