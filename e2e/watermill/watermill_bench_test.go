package watermill_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	wmjs "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/jetstream"
	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/benchcmp"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/jetstream"
)

// Watermill's NATS JetStream backend (watermill-nats/v2, package
// pkg/jetstream, built on the same nats.go jetstream API as the raw side)
// runs as a third contestant beside raw nats.go and the hub, on the same
// embedded server, over in-process connections of its own. Its logger is
// watermill.NopLogger: the default one prints a line per message received.

// wmEnv is the hub, a raw nats.go JetStream context, a Watermill publisher
// and a plain connection for Watermill's streams, on one embedded server.
type wmEnv struct {
	bus   *jetstream.Bus
	js    njs.JetStream
	srvJS njs.JetStream // for the Watermill side's streams and consumers
	wmPub *wmjs.Publisher
	wmCfg wmjs.SubscriberConfig
}

func newWMEnv(b *testing.B) *wmEnv {
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
	ctx := context.Background()
	for name, subj := range map[string]string{"RAW": "raw.>", "WM": "wm.>", "WMPUB": "WMPUB"} {
		if _, err := js.CreateStream(ctx, njs.StreamConfig{Name: name, Subjects: []string{subj}, Storage: njs.FileStorage}); err != nil {
			b.Fatal(err)
		}
	}
	// The Watermill publisher publishes each message to the subject named
	// like its topic's stream.
	pub, err := wmjs.NewPublisher(wmjs.PublisherConfig{
		Conn:            natstest.InProcessConn(b, srv),
		Logger:          watermill.NopLogger{},
		ConfigureStream: func(string) njs.StreamConfig { return njs.StreamConfig{Name: "WMPUB"} },
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = pub.Close() })
	return &wmEnv{
		bus:   bus,
		js:    js,
		srvJS: js,
		wmPub: pub,
		wmCfg: wmjs.SubscriberConfig{
			Conn:   natstest.InProcessConn(b, srv),
			Logger: watermill.NopLogger{},
		},
	}
}

// BenchmarkPublish1KiB: synchronous publishes (each waits for its
// acknowledgement) of 1 KiB events: raw nats.go PublishMsg, the hub's
// Publish, and Watermill's JetStream Publisher (which publishes
// synchronously only).
func BenchmarkPublish1KiB(b *testing.B) {
	env := newWMEnv(b)
	data := payloadOf(1024)
	ctx := context.Background()
	compareAll(b, "msgs",
		contestant{Name: "raw", Run: func(n int) {
			for range n {
				if _, err := env.js.PublishMsg(ctx, &nats.Msg{Subject: "raw.sync", Data: data}); err != nil {
					b.Fatal(err)
				}
			}
		}},
		contestant{Name: "hub", Run: func(n int) {
			for range n {
				if _, err := env.bus.Publish(ctx, "bench.sync", data, facade.PublishOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		}},
		contestant{Name: "watermill", Run: func(n int) {
			for range n {
				if err := env.wmPub.Publish("bench", message.NewMessage(watermill.NewUUID(), []byte(data))); err != nil {
					b.Fatal(err)
				}
			}
		}},
	)
}

// BenchmarkConsumeAck1KiB: a fresh durable group reads n stored 1 KiB
// events from the start and acknowledges each: raw nats.go Consume with
// Ack (library defaults), the hub's Subscribe (auto-ack), and Watermill's
// JetStream Subscriber, with its asynchronous ack (AckAsync, like raw Ack)
// and with its default synchronous one (DoubleAck). A pass ends when the
// server has registered every ack: the consumer's ack floor reached the
// last event.
func BenchmarkConsumeAck1KiB(b *testing.B) { benchConsumeAck(b, 1024) }

// BenchmarkConsumeAck128B is BenchmarkConsumeAck1KiB with 128 B events.
func BenchmarkConsumeAck128B(b *testing.B) { benchConsumeAck(b, 128) }

func benchConsumeAck(b *testing.B, size int) {
	env := newWMEnv(b)
	data := payloadOf(size)
	ctx := context.Background()
	filled := 0
	need := func(n int) {
		for ; filled < n; filled++ {
			benchcmp.RawPublishAsync(b, env.js, &nats.Msg{Subject: "raw.consume", Data: data})
			benchcmp.RawPublishAsync(b, env.js, &nats.Msg{Subject: "wm.consume", Data: data,
				Header: nats.Header{wmnats.WatermillUUIDHdr: {watermill.NewUUID()}}})
			if _, err := env.bus.PublishAsync(ctx, "bench.consume", data, facade.PublishOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		<-env.js.PublishAsyncComplete()
		<-env.bus.JetStream().PublishAsyncComplete()
	}
	round := 0
	newConsumer := func(stream, subject string) njs.Consumer {
		round++
		cons, err := env.srvJS.CreateConsumer(ctx, stream, njs.ConsumerConfig{
			Durable: fmt.Sprintf("c%d", round), AckPolicy: njs.AckExplicitPolicy, FilterSubject: subject,
		})
		if err != nil {
			b.Fatal(err)
		}
		return cons
	}
	watermillRun := func(ackAsync bool) func(n int) {
		return func(n int) {
			need(n)
			cons := newConsumer("WM", "wm.consume")
			cfg := env.wmCfg
			cfg.AckAsync = ackAsync
			cfg.ResourceInitializer = func(context.Context, njs.JetStream, string) (njs.Consumer, func(context.Context, watermill.LoggerAdapter), error) {
				return cons, nil, nil
			}
			sub, err := wmjs.NewSubscriber(cfg)
			if err != nil {
				b.Fatal(err)
			}
			sctx, cancel := context.WithCancel(ctx)
			msgs, err := sub.Subscribe(sctx, "wm.consume")
			if err != nil {
				b.Fatal(err)
			}
			for range n {
				(<-msgs).Ack()
			}
			benchcmp.WaitAckFloor(ctx, b, cons, uint64(n))
			// Delete the consumer before ending the subscription: a
			// Watermill subscription ended by its ctx closes its output
			// channel while its consumer may still deliver (the events
			// the next pass stores), and then panics sending on it. Not
			// sub.Close: it drains the connection, which the next pass
			// uses again.
			if err := env.srvJS.DeleteConsumer(ctx, "WM", cons.CachedInfo().Name); err != nil {
				b.Fatal(err)
			}
			cancel()
		}
	}
	var hubTopic *jetstream.TopicInfo // the hub's stream, looked up once
	compareAll(b, "msgs",
		contestant{Name: "raw", Run: func(n int) {
			need(n)
			cons := newConsumer("RAW", "raw.consume")
			cc := benchcmp.RawConsumeN(b, cons, n)
			benchcmp.WaitAckFloor(ctx, b, cons, uint64(n))
			cc.Stop()
		}},
		contestant{Name: "hub", Run: func(n int) {
			need(n)
			round++
			group := fmt.Sprintf("hub%d", round)
			unsub := benchcmp.ConsumeN(ctx, b, env.bus, "bench.consume", group, n)
			// Its group's consumer, polled as the others' are (GetCursor
			// would read the event at the ack floor on every poll too).
			if hubTopic == nil {
				var err error
				if hubTopic, err = env.bus.LookupTopic(ctx, "bench.consume"); err != nil {
					b.Fatal(err)
				}
			}
			cons, err := hubTopic.Stream.Consumer(ctx, hubTopic.ConsumerName(group))
			if err != nil {
				b.Fatal(err)
			}
			benchcmp.WaitAckFloor(ctx, b, cons, uint64(n))
			_ = unsub.Stop(ctx)
		}},
		contestant{Name: "watermill", Run: watermillRun(true)},
		contestant{Name: "watermill-doubleack", Run: watermillRun(false)},
	)
}
