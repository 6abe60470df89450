package jetstream_test

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/benchcmp"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/jetstream"
)

// clusterSetup is a cluster benchmark's stream replicas and server settings.
type clusterSetup struct {
	name     string
	replicas int
	cfg      natstest.ClusterConfig
}

// clusterSetups: R1 and R3, with the servers' default sync interval (a
// flush to disk every two minutes) and with sync_interval: always (every
// write flushed before it is acknowledged).
var clusterSetups = []clusterSetup{
	{"R1", 1, natstest.ClusterConfig{}},
	{"R3", 3, natstest.ClusterConfig{}},
	{"R1-syncalways", 1, natstest.ClusterConfig{SyncAlways: true}},
	{"R3-syncalways", 3, natstest.ClusterConfig{SyncAlways: true}},
}

// clusterBenchEnv is a hub and a raw nats.go client on a three-node cluster
// of nats-server processes, with streams of the setup's replicas.
func clusterBenchEnv(b *testing.B, setup clusterSetup) *benchEnv {
	b.Helper()
	replicas := setup.replicas
	c := natstest.StartClusterWith(b, 3, setup.cfg)
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
	return &benchEnv{bus: bus, js: js, cluster: c}
}

// reportStoreSize reports the bytes per event of a stream of 1 KiB events:
// as the stream's state counts them, and as its message blocks take on disk
// on one replica (the nodes' stream directories over the replicas; the
// replication log, compacted as it goes, is not counted).
func reportStoreSize(b *testing.B, env *benchEnv, stream, side string) {
	b.Helper()
	s, err := env.js.Stream(context.Background(), stream)
	if err != nil {
		b.Fatal(err)
	}
	info := s.CachedInfo()
	if info.State.Msgs == 0 {
		return
	}
	var disk int64
	for _, nd := range env.cluster.Nodes {
		_ = filepath.WalkDir(filepath.Join(nd.Dir, "jetstream", "$G", "streams", stream), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if fi, err := d.Info(); err == nil {
					disk += fi.Size()
				}
			}
			return nil
		})
	}
	b.ReportMetric(float64(info.State.Bytes)/float64(info.State.Msgs), side+"-stored-B/event")
	b.ReportMetric(float64(disk)/float64(info.Config.Replicas)/float64(info.State.Msgs), side+"-disk-B/event/replica")
}

// BenchmarkClusterPublish compares the hub with raw nats.go on a
// three-node cluster, for R1 and R3 streams, each with and without
// sync_interval: always: async publish throughput (1 KiB) and sync publish
// latency (128 B). Opt in with -benchtime=Nx, e.g.
//
//	go test -run XXX -bench ClusterPublish -benchtime 20000x ./jetstream
func BenchmarkClusterPublish(b *testing.B) {
	for _, setup := range clusterSetups {
		b.Run(setup.name+"/async-1KiB", func(b *testing.B) {
			env := clusterBenchEnv(b, setup)
			data := payloadOf(1024)
			ctx := context.Background()
			compare(b, "msgs",
				// Each side waits for its acks once per window: with
				// sync_interval: always the window fills faster than the
				// disk drains it, and nats.go gives up on a full window
				// after 200 ms.
				func(n int) {
					for i := range n {
						if _, err := env.js.PublishMsgAsync(&nats.Msg{Subject: "raw.async", Data: data}); err != nil {
							b.Fatal(err)
						}
						if i%benchWindow == benchWindow-1 {
							<-env.js.PublishAsyncComplete()
						}
					}
					<-env.js.PublishAsyncComplete()
				},
				func(n int) {
					for i := range n {
						if _, err := env.bus.PublishAsync(ctx, "bench.async", data, facade.PublishOptions{}); err != nil {
							b.Fatal(err)
						}
						if i%benchWindow == benchWindow-1 {
							<-env.bus.JetStream().PublishAsyncComplete()
						}
					}
					<-env.bus.JetStream().PublishAsyncComplete()
				})
			reportStoreSize(b, env, "RAW", "raw")
			ti, err := env.bus.LookupTopic(ctx, "bench.async")
			if err != nil {
				b.Fatal(err)
			}
			reportStoreSize(b, env, ti.StreamName, "hub")
		})
		b.Run(setup.name+"/sync-128B", func(b *testing.B) {
			env := clusterBenchEnv(b, setup)
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

// BenchmarkClusterConsumeAck compares a hub group subscription with a raw
// nats.go durable consumer (Consume and Ack, library defaults) on a
// three-node cluster: each pass reads the stream from its start with a new
// group and ends when the server has registered every ack (the consumer's
// ack floor reaches the last event read). Both streams are filled before
// the timed passes. Opt in with -benchtime=Nx, e.g.
//
//	go test -run XXX -bench ClusterConsumeAck -benchtime 20000x ./jetstream
func BenchmarkClusterConsumeAck(b *testing.B) {
	for _, setup := range clusterSetups {
		b.Run(setup.name+"/128B", func(b *testing.B) {
			env := clusterBenchEnv(b, setup)
			data := payloadOf(128)
			ctx := context.Background()
			n := max(b.N/4, 1) // compare's pass size
			for i := range n {
				if _, err := env.js.PublishMsgAsync(&nats.Msg{Subject: "raw.consume", Data: data}); err != nil {
					b.Fatal(err)
				}
				if _, err := env.bus.PublishAsync(ctx, "bench.consume", data, facade.PublishOptions{}); err != nil {
					b.Fatal(err)
				}
				if i%1000 == 999 || i == n-1 { // within the async window, however slow the disk
					<-env.js.PublishAsyncComplete()
					<-env.bus.JetStream().PublishAsyncComplete()
				}
			}
			ti, err := env.bus.LookupTopic(ctx, "bench.consume")
			if err != nil {
				b.Fatal(err)
			}
			raw, err := env.js.Stream(ctx, "RAW")
			if err != nil {
				b.Fatal(err)
			}
			round := 0
			compare(b, "msgs",
				func(n int) {
					round++
					cons, err := raw.CreateConsumer(ctx, njs.ConsumerConfig{
						Durable: fmt.Sprintf("raw%d", round), AckPolicy: njs.AckExplicitPolicy, FilterSubject: "raw.consume",
					})
					if err != nil {
						b.Fatal(err)
					}
					cc := benchcmp.RawConsumeN(b, cons, n)
					benchcmp.WaitAckFloor(ctx, b, cons, uint64(n))
					cc.Stop()
				},
				func(n int) {
					round++
					group := fmt.Sprintf("hub%d", round)
					unsub := benchcmp.ConsumeN(ctx, b, env.bus, "bench.consume", group, n)
					cons, err := ti.Stream.Consumer(ctx, ti.ConsumerName(group))
					if err != nil {
						b.Fatal(err)
					}
					benchcmp.WaitAckFloor(ctx, b, cons, uint64(n))
					_ = unsub.Stop(ctx)
				})
		})
	}
}
