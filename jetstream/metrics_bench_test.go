package jetstream_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/benchcmp"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/metrics"
)

// BenchmarkMetricsOverhead runs the publish and consume paths with Prometheus
// metrics off and on, alternating, and reports on/off (target ≥ 0.95).
func BenchmarkMetricsOverhead(b *testing.B) {
	srv := natstest.RunEmbedded(b)
	m, err := metrics.New(prometheus.NewRegistry(), metrics.Config{})
	if err != nil {
		b.Fatal(err)
	}
	off, err := jetstream.New(natstest.InProcessConn(b, srv), jetstream.Config{PublishAsyncMaxPending: benchWindow})
	if err != nil {
		b.Fatal(err)
	}
	on, err := jetstream.New(natstest.InProcessConn(b, srv), jetstream.Config{PublishAsyncMaxPending: benchWindow, Observer: m})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { off.Close(); on.Close() })
	data := payloadOf(128)
	ctx := context.Background()
	publish := func(bus *jetstream.Bus, topic string) func(int) {
		return func(n int) {
			for range n {
				if _, err := bus.PublishAsync(ctx, topic, data, facade.PublishOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			<-bus.JetStream().PublishAsyncComplete()
		}
	}
	b.Run("publish", func(b *testing.B) {
		compareNamed(b, "msgs", "off", publish(off, "mo.off"), "on", publish(on, "mo.on"))
	})
	round := 0
	consume := func(bus *jetstream.Bus, topic string) func(int) {
		return func(n int) {
			publish(bus, topic)(n)
			round++
			unsub := benchcmp.ConsumeN(ctx, b, bus, topic, fmt.Sprintf("g%d", round), n)
			_ = unsub.Stop(ctx)
		}
	}
	b.Run("publish+consume", func(b *testing.B) {
		compareNamed(b, "msgs", "off", consume(off, "mc.off"), "on", consume(on, "mc.on"))
	})
}
