package hub_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/jetstream"
)

// BenchmarkNativeScoped measures what a scoped token's own account costs a
// native nats.go client: every publish, pull and ack crosses an import into
// the hub's account. "raw" is the same nats.go code on an admin token, in
// the hub's account as a plain nats.go user of the server would be; each
// path has its own topic and group, with nats.go's defaults, and a consume
// pass ends when the server has registered every ack. Reported: both
// rates and scoped/raw, for 1 KiB acknowledged async publishes and for
// consume+ack.
func BenchmarkNativeScoped(b *testing.B) {
	h, err := hub.Start(b.Context(), hub.Config{NATS: hub.NATSConfig{DataDir: b.TempDir()}, Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Shutdown(context.Background()) })
	ctx := b.Context()
	// One group per consume round: a nats.go consumer stopped while events
	// arrive can leave its pull taking them until it expires (see
	// docs/nats.md).
	const rounds = 4
	type path struct {
		name, topic string
		js          njs.JetStream
		cons        []njs.Consumer
	}
	var paths []*path
	for _, p := range []struct{ name, topic string }{{"raw", "bench.raw"}, {"scoped", "bench.scoped"}} {
		// The topic's stream and groups, made through the hub.
		for r := range rounds {
			sub, err := h.Bus.Subscribe(ctx, p.topic, fmt.Sprint("g", r), func(context.Context, facade.Delivery) error { return nil }, facade.SubscribeOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if err := sub.Stop(ctx); err != nil {
				b.Fatal(err)
			}
		}
		tok, err := auth.MintHS256(secret, auth.MintClaims{Subject: p.name, Scopes: []string{"admin"}, TTL: time.Hour}, time.Now())
		if p.name == "scoped" {
			tok, err = auth.MintHS256(secret, auth.MintClaims{Subject: p.name, Scopes: []string{"publish:" + p.topic, "subscribe:" + p.topic}, TTL: time.Hour}, time.Now())
		}
		if err != nil {
			b.Fatal(err)
		}
		nc, err := nats.Connect(h.Bus.Server().ClientURL(), nats.Token(tok))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		js, err := njs.New(nc)
		if err != nil {
			b.Fatal(err)
		}
		stream, err := h.Bus.JetStream().StreamNameBySubject(ctx, p.topic)
		if err != nil {
			b.Fatal(err)
		}
		pp := &path{name: p.name, topic: p.topic, js: js}
		for r := range rounds {
			cons, err := js.Consumer(ctx, stream, jetstream.ConsumerName(fmt.Sprint("g", r), p.topic, false))
			if err != nil {
				b.Fatal(err)
			}
			pp.cons = append(pp.cons, cons)
		}
		paths = append(paths, pp)
	}
	payload := []byte(`"` + strings.Repeat("x", 1022) + `"`)
	publish := func(p *path, n int) {
		for range n {
			if _, err := p.js.PublishAsync(p.topic, payload); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-p.js.PublishAsyncComplete():
		case <-time.After(time.Minute):
			b.Fatal("publishes not acknowledged")
		}
	}
	// consume reads group r to the end of the stream (n events).
	consume := func(p *path, r, n int) {
		var got atomic.Int64
		cons := p.cons[r]
		cc, err := cons.Consume(func(m njs.Msg) {
			_ = m.Ack()
			got.Add(1)
		})
		if err != nil {
			b.Fatal(err)
		}
		defer cc.Stop()
		deadline := time.Now().Add(time.Minute)
		for {
			if got.Load() >= int64(n) {
				info, err := cons.Info(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if info.AckFloor.Stream >= uint64(n) && info.NumAckPending == 0 {
					return
				}
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s: %d of %d consumed", p.name, got.Load(), n)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	n := max(b.N/rounds, 200)
	var pubD, conD [2]time.Duration
	b.ResetTimer()
	for r := range rounds {
		for _, i := range []int{r % 2, 1 - r%2} {
			t0 := time.Now()
			publish(paths[i], n)
			pubD[i] += time.Since(t0)
		}
	}
	for r := range rounds {
		for _, i := range []int{r % 2, 1 - r%2} {
			t0 := time.Now()
			consume(paths[i], r, n*rounds)
			conD[i] += time.Since(t0)
		}
	}
	b.StopTimer()
	rate := func(d time.Duration, events int) float64 { return float64(events) / d.Seconds() }
	b.ReportMetric(rate(pubD[0], n*rounds), "raw-pub/s")
	b.ReportMetric(rate(pubD[1], n*rounds), "scoped-pub/s")
	b.ReportMetric(pubD[0].Seconds()/pubD[1].Seconds(), "pub-scoped/raw")
	b.ReportMetric(rate(conD[0], n*rounds*rounds), "raw-consume/s")
	b.ReportMetric(rate(conD[1], n*rounds*rounds), "scoped-consume/s")
	b.ReportMetric(conD[0].Seconds()/conD[1].Seconds(), "consume-scoped/raw")
}
