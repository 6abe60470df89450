package hub_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/client"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/limits"
)

// BenchmarkPublishLimits publishes over WebSocket (the Go client, 8
// publishers) to a hub whose every publish passes a per-principal and a
// per-topic rate limit, and to one without limits, in alternating rounds
// of one run. limits_on/off is the throughput ratio (target ≥ 0.97).
func BenchmarkPublishLimits(b *testing.B) {
	generous := limits.Config{
		Rates: []limits.RateRule{
			{Events: 1e9, Bytes: 1e12},
			{Per: limits.PerTopic, Topic: "bench.**", Events: 1e9},
		},
		Quotas: limits.Quotas{Topics: 100, Groups: 100, Subscriptions: 100, Connections: 100},
	}
	dialHub := func(lc limits.Config) *client.Client {
		h, err := hub.Start(b.Context(), hub.Config{NATS: hub.NATSConfig{Memory: true, Port: -1}, Server: hub.ServerConfig{OpsPort: -1, HTTPPort: -1}, Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}, Limits: lc})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = h.Shutdown(context.Background()) })
		c, err := client.Dial(b.Context(), "ws://"+h.Addr("ws"), client.Config{Token: mintSubject(b, "bench"), NoReconnect: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		if _, err := c.Publish(b.Context(), "bench.limits", json.RawMessage(`{}`), facade.PublishOptions{}); err != nil {
			b.Fatal(err)
		}
		return c
	}
	on, off := dialHub(generous), dialHub(limits.Config{})
	payload := json.RawMessage(`{"host":"web-1","cpu":0.42,"mem":1234567}`)
	const workers, round = 8, 400
	run := func(c *client.Client, n int) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				for i := w; i < n; i += workers {
					if _, err := c.Publish(b.Context(), "bench.limits", payload, facade.PublishOptions{}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var tOn, tOff time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		if done/round%2 == 0 {
			tOn += run(on, n)
			tOff += run(off, n)
		} else {
			tOff += run(off, n)
			tOn += run(on, n)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(tOff)/float64(tOn), "limits_on/off")
	b.ReportMetric(float64(b.N)/tOn.Seconds(), "ev/s_on")
}
