package jetstream_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/eventhub/eventhub/facade"
)

// BenchmarkConsumeOrdered: a group that reads and acknowledges n events of
// 128 bytes, raw nats.go (as in BenchmarkConsumeAck) beside hub groups on
// topics whose events have 1, 10 and 1,000 distinct keys: unordered
// (maxInFlight 1000), ordered by key, and unordered with maxInFlight 1
// (strict order without keys). Handlers do no work, so the figures are the
// delivery path's own.
func BenchmarkConsumeOrdered(b *testing.B) {
	env := newBenchEnv(b)
	data := payloadOf(128)
	ctx := context.Background()
	// Every contestant reads the first n events of its topic with a new
	// group per round; the topics are filled before timing.
	topics := map[int]string{1: "bench.ord1", 10: "bench.ord10", 1000: "bench.ord1000"}
	filled := 0
	fill := func(n int) {
		for i := filled; i < n; i++ {
			env.js.PublishMsgAsync(&nats.Msg{Subject: "raw.ordered", Data: data})
			for k, topic := range topics {
				env.bus.PublishAsync(ctx, topic, data, facade.PublishOptions{Key: fmt.Sprintf("k%d", i%k)})
			}
		}
		<-env.js.PublishAsyncComplete()
		<-env.bus.JetStream().PublishAsyncComplete()
		filled = max(filled, n)
	}
	round := 0
	raw := func(n int) {
		round++
		rawConsume(b, env.js, fmt.Sprintf("rawo%d", round), "raw.ordered", n)
	}
	var work time.Duration // each hub handler's work
	hub := func(topic string, o facade.SubscribeOptions) func(n int) {
		return func(n int) {
			round++
			var got atomic.Int64
			done := make(chan struct{})
			o.From = facade.FromEarliest
			sub, err := env.bus.Subscribe(ctx, topic, fmt.Sprintf("ord%d", round),
				func(context.Context, facade.Delivery) error {
					if work > 0 {
						time.Sleep(work)
					}
					if got.Add(1) == int64(n) {
						close(done)
					}
					return nil
				}, o)
			if err != nil {
				b.Fatal(err)
			}
			<-done
			waitHubAckFloor(ctx, b, env.bus, topic, fmt.Sprintf("ord%d", round), n)
			_ = sub.Stop(ctx)
		}
	}
	// Each ordered group beside an unordered one on the same topic: the
	// store serves a topic of many key subjects slower, whatever the group.
	ordered := facade.SubscribeOptions{OrderBy: facade.OrderByKey}
	mif1 := facade.SubscribeOptions{MaxInFlight: 1}
	b.Run("nowork", func(b *testing.B) {
		fill(b.N + 200)
		compareAll(b, "msgs",
			contestant{Name: "raw", Run: raw},
			contestant{Name: "hub-1key", Run: hub(topics[1], facade.SubscribeOptions{})},
			contestant{Name: "ordered-1key", Run: hub(topics[1], ordered)},
			contestant{Name: "hub-10keys", Run: hub(topics[10], facade.SubscribeOptions{})},
			contestant{Name: "ordered-10keys", Run: hub(topics[10], ordered)},
			contestant{Name: "mif1-10keys", Run: hub(topics[10], mif1)},
			contestant{Name: "hub-1000keys", Run: hub(topics[1000], facade.SubscribeOptions{})},
			contestant{Name: "ordered-1000keys", Run: hub(topics[1000], ordered)},
		)
	})
	// With 200 µs of work per event, against strict order (maxInFlight 1)
	// as the reference: what running keys in parallel buys.
	b.Run("work200us", func(b *testing.B) {
		fill(b.N + 200)
		work = 200 * time.Microsecond
		compareAll(b, "msgs",
			contestant{Name: "mif1-10keys", Run: hub(topics[10], mif1)},
			contestant{Name: "ordered-1key", Run: hub(topics[1], ordered)},
			contestant{Name: "ordered-10keys", Run: hub(topics[10], ordered)},
			contestant{Name: "ordered-1000keys", Run: hub(topics[1000], ordered)},
			contestant{Name: "hub-10keys", Run: hub(topics[10], facade.SubscribeOptions{})},
		)
	})
}
