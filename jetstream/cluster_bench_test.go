package jetstream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/jetstream"
)

// clusterBenchEnv is a hub and a raw nats.go client on a three-node cluster
// of nats-server processes, with streams of the given replicas.
func clusterBenchEnv(b *testing.B, replicas int) *benchEnv {
	b.Helper()
	c := natstest.StartCluster(b, 3)
	bus, err := jetstream.Open(context.Background(), jetstream.OpenConfig{
		URL: c.URL(),
		Bus: jetstream.Config{Replicas: replicas, PublishAsyncMaxPending: benchWindow},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bus.Close() })
	nc, err := nats.Connect(c.URL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := njs.New(nc, njs.WithPublishAsyncMaxPending(benchWindow))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), njs.StreamConfig{
		Name: "RAW", Subjects: []string{"raw.>"}, Storage: njs.FileStorage, Replicas: replicas,
	}); err != nil {
		b.Fatal(err)
	}
	return &benchEnv{bus: bus, js: js}
}

// BenchmarkClusterPublish compares the hub with raw nats.go on a
// three-node cluster, for R1 and R3 streams: async publish throughput
// (1 KiB) and sync publish latency (128 B). Opt in with -benchtime=Nx, e.g.
//
//	go test -run XXX -bench ClusterPublish -benchtime 20000x ./jetstream
func BenchmarkClusterPublish(b *testing.B) {
	for _, r := range []int{1, 3} {
		b.Run(fmt.Sprintf("R%d/async-1KiB", r), func(b *testing.B) {
			env := clusterBenchEnv(b, r)
			data := payloadOf(1024)
			ctx := context.Background()
			compare(b, "msgs",
				func(n int) {
					for range n {
						if _, err := env.js.PublishMsgAsync(&nats.Msg{Subject: "raw.async", Data: data}); err != nil {
							b.Fatal(err)
						}
					}
					<-env.js.PublishAsyncComplete()
				},
				func(n int) {
					for range n {
						if _, err := env.bus.PublishAsync(ctx, "bench.async", data, facade.PublishOptions{}); err != nil {
							b.Fatal(err)
						}
					}
					<-env.bus.JetStream().PublishAsyncComplete()
				})
		})
		b.Run(fmt.Sprintf("R%d/sync-128B", r), func(b *testing.B) {
			env := clusterBenchEnv(b, r)
			data := payloadOf(128)
			ctx := context.Background()
			var rawLat, hubLat []time.Duration
			compare(b, "msgs",
				func(n int) {
					for range n {
						t0 := time.Now()
						if _, err := env.js.Publish(ctx, "raw.sync", data); err != nil {
							b.Fatal(err)
						}
						rawLat = append(rawLat, time.Since(t0))
					}
				},
				func(n int) {
					for range n {
						t0 := time.Now()
						if _, err := env.bus.Publish(ctx, "bench.sync", data, facade.PublishOptions{}); err != nil {
							b.Fatal(err)
						}
						hubLat = append(hubLat, time.Since(t0))
					}
				})
			_, rp99 := percentiles(rawLat)
			_, hp99 := percentiles(hubLat)
			b.ReportMetric(float64(rp99.Microseconds()), "raw-p99-µs")
			b.ReportMetric(float64(hp99.Microseconds()), "hub-p99-µs")
		})
	}
}
