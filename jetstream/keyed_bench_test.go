package jetstream_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/benchcmp"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/jetstream"
)

// Keyed benchmarks: the hub's path beside raw nats.go on the same embedded
// server, in alternating rounds; read the ratios.

// benchKeys is the number of keys of the LatestByKey benchmarks' topic
// (EVENTHUB_BENCH_KEYS overrides it).
func benchKeys() int {
	if n, err := strconv.Atoi(os.Getenv("EVENTHUB_BENCH_KEYS")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

func benchKey(i int) string { return "host-" + strconv.Itoa(i%50) + ":proc:" + strconv.Itoa(i) }

// newKeyedBench returns a bus whose "bench.kv" topic is compacted and holds
// keys keys, and the same topic's stream as seen by a raw nats.go client on
// its own connection.
func newKeyedBench(b *testing.B, keys int) (*jetstream.Bus, njs.Stream) {
	b.Helper()
	srv := natstest.RunEmbedded(b)
	bus, err := jetstream.New(natstest.InProcessConn(b, srv), jetstream.Config{
		PublishAsyncMaxPending: benchWindow,
		Topics:                 []jetstream.TopicConfig{{Pattern: "bench.kv", Compaction: true}},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bus.Close() })
	ctx := context.Background()
	data := payloadOf(128)
	t0 := time.Now()
	for i := range keys {
		publishAsync(b, ctx, bus, "bench.kv", data, benchKey(i))
	}
	<-bus.JetStream().PublishAsyncComplete()
	b.Logf("filled %d keys in %v", keys, time.Since(t0).Round(time.Millisecond))
	js, err := njs.New(natstest.InProcessConn(b, srv))
	if err != nil {
		b.Fatal(err)
	}
	name, err := js.StreamNameBySubject(ctx, "bench.kv")
	if err != nil {
		b.Fatal(err)
	}
	s, err := js.Stream(ctx, name)
	if err != nil {
		b.Fatal(err)
	}
	return bus, s
}

// BenchmarkLatestByKey reads n keys of a topic with 100,000 keys with
// LatestByKey, beside raw nats.go reading the same keys of the same stream
// with Stream.GetLastMsgForSubject (a direct get per key), and reports the
// time per key of each and raw/hub (≥ 1: the hub is as fast or faster).
func BenchmarkLatestByKey(b *testing.B) {
	total := benchKeys()
	bus, raw := newKeyedBench(b, total)
	ctx := context.Background()
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			round := 0
			pick := func() []string {
				keys := make([]string, n)
				for j := range keys {
					keys[j] = benchKey((round*7919 + j*104729) % total)
				}
				round++
				return keys
			}
			rawRound := func() time.Duration {
				keys := pick()
				t0 := time.Now()
				for _, k := range keys {
					m, err := raw.GetLastMsgForSubject(ctx, "bench.kv._k."+jetstream.EncodeKey(k))
					if err != nil || len(m.Data) == 0 {
						b.Fatal(err)
					}
				}
				return time.Since(t0)
			}
			hubRound := func() time.Duration {
				keys := pick()
				t0 := time.Now()
				got, err := bus.LatestByKey(ctx, "bench.kv", keys)
				if err != nil || len(got) != len(keys) {
					b.Fatalf("%d keys, %v", len(got), err)
				}
				return time.Since(t0)
			}
			var rawD, hubD time.Duration
			i := 0
			for b.Loop() {
				if i++; i%2 == 0 { // alternate which goes first
					rawD += rawRound()
					hubD += hubRound()
				} else {
					hubD += hubRound()
					rawD += rawRound()
				}
			}
			perKey := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*n) }
			b.ReportMetric(perKey(rawD), "raw-ns/key")
			b.ReportMetric(perKey(hubD), "hub-ns/key")
			b.ReportMetric(float64(rawD)/float64(hubD), "raw/hub")
		})
	}
}

// BenchmarkLatestScan reads the newest event of every key of a topic with
// 1,000 keys (one multi_last request) and with 100,000 keys (the consumer
// fallback), beside raw nats.go reading the same compacted stream with an
// ordered consumer from the start (what a plain client would do: on a
// compacted stream every message is its key's newest).
func BenchmarkLatestScan(b *testing.B) {
	for _, keys := range []int{1000, benchKeys()} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			bus, raw := newKeyedBench(b, keys)
			ctx := context.Background()
			var rawD, hubD time.Duration
			for b.Loop() {
				t0 := time.Now()
				oc, err := raw.OrderedConsumer(ctx, njs.OrderedConsumerConfig{FilterSubjects: []string{"bench.kv._k.*"}})
				if err != nil {
					b.Fatal(err)
				}
				it, err := oc.Messages(njs.PullMaxMessages(1000))
				if err != nil {
					b.Fatal(err)
				}
				for range keys {
					if _, err := it.Next(); err != nil {
						b.Fatal(err)
					}
				}
				it.Stop()
				rawD += time.Since(t0)
				t0 = time.Now()
				got := 0
				if _, err := bus.Latest(ctx, "bench.kv", func(*facade.EventRecord) error { got++; return nil }); err != nil || got != keys {
					b.Fatalf("%d keys, %v", got, err)
				}
				hubD += time.Since(t0)
			}
			b.ReportMetric(float64(rawD.Nanoseconds())/float64(b.N*keys), "raw-ns/key")
			b.ReportMetric(float64(hubD.Nanoseconds())/float64(b.N*keys), "hub-ns/key")
			b.ReportMetric(float64(rawD)/float64(hubD), "raw/hub")
		})
	}
}

// BenchmarkCompactedPublish: pipelined keyed publishes (10,000 keys in
// turn) into a compacted topic, beside raw PublishMsgAsync into a compacted
// stream of the same shape (max_msgs_per_subject 1, file storage, keyed
// subjects): bare messages ("vs=raw"), and messages carrying the same
// envelope headers as the hub's (Eventhub-Id and Eventhub-Ts:
// "vs=raw-envelope"), which shows what the envelope costs apart from the
// hub's code.
func BenchmarkCompactedPublish(b *testing.B) {
	for _, envelope := range []bool{false, true} {
		name := "vs=raw"
		if envelope {
			name = "vs=raw-envelope"
		}
		b.Run(name, func(b *testing.B) {
			env := newCompactedEnv(b)
			data := payloadOf(128)
			ctx := context.Background()
			const keys = 10_000
			i, j := 0, 0
			compare(b, "msgs",
				func(n int) {
					for range n {
						i++
						m := &nats.Msg{Subject: "rawkv._k." + benchKey(i%keys), Data: data}
						if envelope {
							m.Header = nats.Header{
								jetstream.HeaderID: []string{facade.NewID()},
								jetstream.HeaderTS: []string{strconv.FormatInt(time.Now().UnixMilli(), 10)},
							}
						}
						benchcmp.RawPublishAsync(b, env.js, m)
					}
					<-env.js.PublishAsyncComplete()
				},
				func(n int) {
					for range n {
						j++
						publishAsync(b, ctx, env.bus, "bench.kv", data, benchKey(j%keys))
					}
					<-env.bus.JetStream().PublishAsyncComplete()
				})
		})
	}
}

func newCompactedEnv(b *testing.B) *benchEnv {
	b.Helper()
	srv := natstest.RunEmbedded(b)
	bus, err := jetstream.New(natstest.InProcessConn(b, srv), jetstream.Config{
		PublishAsyncMaxPending: benchWindow,
		Topics:                 []jetstream.TopicConfig{{Pattern: "bench.kv", Compaction: true}},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bus.Close() })
	js, err := njs.New(natstest.InProcessConn(b, srv), njs.WithPublishAsyncMaxPending(benchWindow))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), njs.StreamConfig{
		Name: "RAWKV", Subjects: []string{"rawkv", "rawkv._k.*"}, Storage: njs.FileStorage,
		MaxMsgsPerSubject: 1, AllowDirect: true, Duplicates: 2 * time.Minute,
	}); err != nil {
		b.Fatal(err)
	}
	return &benchEnv{bus: bus, js: js}
}

// BenchmarkCompactedSize publishes 1,000,000 updates (EVENTHUB_BENCH_UPDATES
// overrides it) over 10,000 keys with 128-byte payloads through the hub and,
// beside it, raw (no envelope headers) into a compacted stream, and reports
// the stream's State.Bytes ÷ (keys × payload) for each. Run it with
// -benchtime=1x.
func BenchmarkCompactedSize(b *testing.B) {
	updates := 1_000_000
	if n, err := strconv.Atoi(os.Getenv("EVENTHUB_BENCH_UPDATES")); err == nil && n > 0 {
		updates = n
	}
	const keys, size = 10_000, 128
	data := payloadOf(size)
	ctx := context.Background()
	for b.Loop() {
		env := newCompactedEnv(b)
		t0 := time.Now()
		for i := range updates {
			benchcmp.RawPublishAsync(b, env.js, &nats.Msg{Subject: "rawkv._k." + benchKey(i%keys), Data: data})
		}
		<-env.js.PublishAsyncComplete()
		rawD := time.Since(t0)
		t0 = time.Now()
		for i := range updates {
			publishAsync(b, ctx, env.bus, "bench.kv", data, benchKey(i%keys))
		}
		<-env.bus.JetStream().PublishAsyncComplete()
		hubD := time.Since(t0)
		rawInfo, err := env.js.Stream(ctx, "RAWKV")
		if err != nil {
			b.Fatal(err)
		}
		name, _ := env.bus.JetStream().StreamNameBySubject(ctx, "bench.kv")
		hubS, err := env.bus.JetStream().Stream(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		rs, hs := rawInfo.CachedInfo().State, hubS.CachedInfo().State
		if rs.Msgs != keys || hs.Msgs != keys {
			b.Fatalf("compacted streams hold %d (raw) and %d (hub) messages, want %d", rs.Msgs, hs.Msgs, keys)
		}
		b.ReportMetric(float64(updates), "updates")
		b.ReportMetric(float64(rs.Bytes)/float64(keys*size), "raw-bytes/(keys×payload)")
		b.ReportMetric(float64(hs.Bytes)/float64(keys*size), "hub-bytes/(keys×payload)")
		b.ReportMetric(float64(updates)/rawD.Seconds(), "raw-msgs/s")
		b.ReportMetric(float64(updates)/hubD.Seconds(), "hub-msgs/s")
	}
}
