package jetstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/benchcmp"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/jetstream"
)

// The benchmarks run the raw nats.go path and the hub's path in alternating
// rounds on one embedded server (file storage, in-process connections) and
// report both rates and their ratio: machines here are shared and noisy, so
// the ratio is the figure to read. Run with -benchtime=Nx for a fixed count.

const benchWindow = 4000

type benchEnv struct {
	bus     *jetstream.Bus
	js      njs.JetStream
	cluster *natstest.Cluster // nil on the embedded server
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	srv := natstest.RunEmbedded(b)
	bus, err := jetstream.New(natstest.InProcessConn(b, srv), jetstream.Config{PublishAsyncMaxPending: benchWindow})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bus.Close() })
	js, err := njs.New(natstest.InProcessConn(b, srv), njs.WithPublishAsyncMaxPending(benchWindow))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), njs.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}, Storage: njs.FileStorage}); err != nil {
		b.Fatal(err)
	}
	return &benchEnv{bus: bus, js: js}
}

// compare times raw and hub for n operations each, alternating in rounds.
func compare(b *testing.B, unit string, raw, hub func(n int)) {
	compareNamed(b, unit, "raw", raw, "hub", hub)
}

// compareNamed times two paths alternately and reports both rates and the
// ratio second/first.
func compareNamed(b *testing.B, unit, rawName string, raw func(n int), hubName string, hub func(n int)) {
	const rounds = 4
	n := max(b.N/rounds, 1)
	raw(min(n, 200)) // warm up both paths (stream creation, connections)
	hub(min(n, 200))
	var rawD, hubD time.Duration
	b.ResetTimer()
	timed := func(f func(int)) time.Duration {
		t0 := time.Now()
		f(n)
		return time.Since(t0)
	}
	// ABBA order: whichever path runs second in a round starts while the
	// server is still flushing the first one's writes.
	for r := range rounds {
		if r%2 == 0 {
			rawD += timed(raw)
			hubD += timed(hub)
		} else {
			hubD += timed(hub)
			rawD += timed(raw)
		}
	}
	b.StopTimer()
	rawRate := float64(n*rounds) / rawD.Seconds()
	hubRate := float64(n*rounds) / hubD.Seconds()
	b.ReportMetric(rawRate, rawName+"-"+unit+"/s")
	b.ReportMetric(hubRate, hubName+"-"+unit+"/s")
	b.ReportMetric(hubRate/rawRate, hubName+"/"+rawName)
}

func payloadOf(size int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("x", size-2) + `"`)
}

// BenchmarkPublishAsync1KiB: pipelined publishes of 1 KiB events, raw
// nats.go PublishMsgAsync beside the hub's PublishAsync; and three raw
// variants that show where the hub's cost lies: raw messages with the
// hub's envelope header for a fresh publish (Eventhub-Ts: "raw-ts", the
// client's and the server's share), with an id header too (Eventhub-Id,
// Eventhub-Ts: "raw-envelope", what a publish with a ts of the caller's
// carries), and raw messages with a Nats-Msg-Id ("raw-msgid", what the
// server's duplicate tracking costs).
func BenchmarkPublishAsync1KiB(b *testing.B) { benchPublishAsync(b, 1024) }

// BenchmarkPublishAsync128B is BenchmarkPublishAsync1KiB with 128 B events.
func BenchmarkPublishAsync128B(b *testing.B) { benchPublishAsync(b, 128) }

func benchPublishAsync(b *testing.B, size int) {
	env := newBenchEnv(b)
	data := payloadOf(size)
	ctx := context.Background()
	compareAll(b, "msgs",
		contestant{Name: "raw", Run: func(n int) {
			for range n {
				if _, err := env.js.PublishMsgAsync(&nats.Msg{Subject: "raw.async", Data: data}); err != nil {
					b.Fatal(err)
				}
			}
			<-env.js.PublishAsyncComplete()
		}},
		contestant{Name: "hub", Run: func(n int) {
			for range n {
				if _, err := env.bus.PublishAsync(ctx, "bench.async", data, facade.PublishOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			<-env.bus.JetStream().PublishAsyncComplete()
		}},
		contestant{Name: "raw-envelope", Run: func(n int) {
			for range n {
				m := &nats.Msg{Subject: "raw.async", Data: data, Header: nats.Header{
					jetstream.HeaderID: {facade.NewID()},
					jetstream.HeaderTS: {strconv.FormatInt(time.Now().UnixMilli(), 10)},
				}}
				if _, err := env.js.PublishMsgAsync(m); err != nil {
					b.Fatal(err)
				}
			}
			<-env.js.PublishAsyncComplete()
		}},
		contestant{Name: "raw-ts", Run: func(n int) {
			for range n {
				m := &nats.Msg{Subject: "raw.async", Data: data, Header: nats.Header{
					jetstream.HeaderTS: {strconv.FormatInt(time.Now().UnixMilli(), 10)},
				}}
				if _, err := env.js.PublishMsgAsync(m); err != nil {
					b.Fatal(err)
				}
			}
			<-env.js.PublishAsyncComplete()
		}},
		contestant{Name: "raw-msgid", Run: func(n int) {
			for range n {
				m := &nats.Msg{Subject: "raw.async", Data: data, Header: nats.Header{nats.MsgIdHdr: {facade.NewID()}}}
				if _, err := env.js.PublishMsgAsync(m); err != nil {
					b.Fatal(err)
				}
			}
			<-env.js.PublishAsyncComplete()
		}},
	)
}

func BenchmarkPublishSyncLatency(b *testing.B) {
	env := newBenchEnv(b)
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
	rp50, rp99 := percentiles(rawLat)
	hp50, hp99 := percentiles(hubLat)
	b.ReportMetric(us(rp50), "raw-p50-µs")
	b.ReportMetric(us(hp50), "hub-p50-µs")
	b.ReportMetric(us(rp99), "raw-p99-µs")
	b.ReportMetric(us(hp99), "hub-p99-µs")
	b.ReportMetric(us(hp99-rp99), "p99-diff-µs")
}

// BenchmarkConsumeAck reads 128 B events with acks, raw nats.go and the
// hub pulling 100 at a time alike, so that the ratio is the hub's own cost
// per event; each pass ends when the server has registered every ack.
// BenchmarkConsumeAck128B in e2e/watermill runs raw with its defaults.
func BenchmarkConsumeAck(b *testing.B) {
	env := newBenchEnv(b)
	data := payloadOf(128)
	ctx := context.Background()
	round := 0
	// Both streams are filled before each timed pass, outside its time.
	fill := func(n int) {
		for range n {
			env.js.PublishMsgAsync(&nats.Msg{Subject: "raw.consume", Data: data})
			env.bus.PublishAsync(ctx, "bench.consume", data, facade.PublishOptions{})
		}
		<-env.js.PublishAsyncComplete()
		<-env.bus.JetStream().PublishAsyncComplete()
	}
	filled := 0
	need := func(n int) {
		if filled < n {
			fill(n - filled)
			filled = n
		}
	}
	compare(b, "msgs",
		func(n int) {
			need(n)
			round++
			rawConsume(b, env.js, fmt.Sprintf("raw%d", round), "raw.consume", n)
		},
		func(n int) {
			need(n)
			round++
			group := fmt.Sprintf("hub%d", round)
			sub := benchcmp.ConsumeN(ctx, b, env.bus, "bench.consume", group, n)
			waitHubAckFloor(ctx, b, env.bus, "bench.consume", group, n)
			_ = sub.Stop(ctx)
		})
}

// waitHubAckFloor returns once the server has registered the acks of the
// first n events of topic (a topic of its own stream) on group's
// consumer, as rawConsume's passes end.
func waitHubAckFloor(ctx context.Context, b *testing.B, bus *jetstream.Bus, topic, group string, n int) {
	b.Helper()
	ti, err := bus.LookupTopic(ctx, topic)
	if err != nil {
		b.Fatal(err)
	}
	cons, err := ti.Stream.Consumer(ctx, ti.ConsumerName(group))
	if err != nil {
		b.Fatal(err)
	}
	benchcmp.WaitAckFloor(ctx, b, cons, uint64(n))
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)*50/100], s[min(len(s)*99/100, len(s)-1)]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// rawConsume reads n events of subject from stream RAW with a new durable
// consumer named durable, acknowledging each, as nats.go's own users do,
// and returns once the server has registered every ack: the raw side of
// the consume benchmarks. subject must be the only one the stream holds.
func rawConsume(b *testing.B, js njs.JetStream, durable, subject string, n int) {
	cons, err := js.CreateConsumer(context.Background(), "RAW", njs.ConsumerConfig{
		Durable: durable, AckPolicy: njs.AckExplicitPolicy,
		FilterSubject: subject, MaxAckPending: 1000,
	})
	if err != nil {
		b.Fatal(err)
	}
	cc := benchcmp.RawConsumeN(b, cons, n, njs.PullMaxMessages(100))
	benchcmp.WaitAckFloor(context.Background(), b, cons, uint64(n))
	cc.Stop()
}
