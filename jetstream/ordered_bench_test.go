package jetstream_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

// BenchmarkConsumeOrdered: a group that reads and acknowledges n events of
// 128 bytes, raw nats.go (as in BenchmarkConsumeAck) beside hub groups:
// unordered (maxInFlight 1000), ordered by key over 1, 10 and 1,000
// distinct keys, and unordered with maxInFlight 1 (strict order without
// keys). Handlers do no work, so the figures are the delivery path's own.
func BenchmarkConsumeOrdered(b *testing.B) {
	env := newBenchEnv(b)
	data := payloadOf(128)
	ctx := context.Background()
	// Every contestant reads the first n events of its topic with a new
	// group per round; the topics are filled once, before timing.
	topics := map[int]string{1: "bench.ord1", 10: "bench.ord10", 1000: "bench.ord1000"}
	for i := range b.N + 200 {
		env.js.PublishMsgAsync(&nats.Msg{Subject: "raw.ordered", Data: data})
		for k, topic := range topics {
			env.bus.PublishAsync(ctx, topic, data, facade.PublishOptions{Key: fmt.Sprintf("k%d", i%k)})
		}
	}
	<-env.js.PublishAsyncComplete()
	<-env.bus.JetStream().PublishAsyncComplete()
	round := 0
	raw := func(n int) {
		round++
		cons, err := env.js.CreateConsumer(ctx, "RAW", njs.ConsumerConfig{
			Durable: fmt.Sprintf("rawo%d", round), AckPolicy: njs.AckExplicitPolicy,
			FilterSubject: "raw.ordered", MaxAckPending: 1000,
		})
		if err != nil {
			b.Fatal(err)
		}
		var got atomic.Int64
		done := make(chan struct{})
		cc, err := cons.Consume(func(m njs.Msg) {
			_ = m.Ack()
			if got.Add(1) == int64(n) {
				close(done)
			}
		}, njs.PullMaxMessages(100))
		if err != nil {
			b.Fatal(err)
		}
		<-done
		cc.Stop()
	}
	hub := func(topic string, o facade.SubscribeOptions) func(n int) {
		return func(n int) {
			round++
			var got atomic.Int64
			done := make(chan struct{})
			o.From = facade.FromEarliest
			sub, err := env.bus.Subscribe(ctx, topic, fmt.Sprintf("ord%d", round),
				func(context.Context, facade.Delivery) error {
					if got.Add(1) == int64(n) {
						close(done)
					}
					return nil
				}, o)
			if err != nil {
				b.Fatal(err)
			}
			<-done
			_ = sub.Stop(ctx)
		}
	}
	ordered := facade.SubscribeOptions{OrderBy: facade.OrderByKey}
	compareAll(b, "msgs",
		contestant{"raw", raw},
		contestant{"hub", hub(topics[1000], facade.SubscribeOptions{})},
		contestant{"hub-key1", hub(topics[1], ordered)},
		contestant{"hub-key10", hub(topics[10], ordered)},
		contestant{"hub-key1000", hub(topics[1000], ordered)},
		contestant{"hub-mif1", hub(topics[1000], facade.SubscribeOptions{MaxInFlight: 1})},
	)
}
