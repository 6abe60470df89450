package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/outbox"
)

var benchPayload = json.RawMessage(`{"order":42,"total":1999,"currency":"EUR","items":[{"sku":"A-1","qty":2}]}`)

// BenchmarkDrain measures how fast one drainer empties a table of records
// already committed, beside publishing the same events straight through the
// bus (Publish in a loop, and PublishAsync pipelined) in the same run.
// Metrics: records/s of each path and the ratios drain/direct.
func BenchmarkDrain(b *testing.B) {
	for _, be := range backends {
		for _, batch := range []int{100, 1000} {
			b.Run(fmt.Sprintf("%s/batch=%d", be.name, batch), func(b *testing.B) {
				benchDrain(b, be.dsn(b), batch)
			})
		}
	}
}

func benchDrain(b *testing.B, dsn string, batch int) {
	const n = 5000
	ctx := context.Background()
	bus := newBus(b)
	s := openStore(b, dsn)
	// Create the streams before timing.
	for _, topic := range []string{"bench.outbox", "bench.sync", "bench.async"} {
		if _, err := bus.Publish(ctx, topic, benchPayload, facade.PublishOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	var drainT, syncT, asyncT time.Duration
	for i := 0; i < b.N; i++ {
		addBench(b, s, "bench.outbox", n)
		d, err := outbox.NewDrainer(s, bus, outbox.Config{WorkerID: "bench", BatchSize: batch, Retention: -1})
		if err != nil {
			b.Fatal(err)
		}
		errc := make(chan error, 1)
		start := time.Now()
		go func() { errc <- d.Run(ctx) }()
		for d.Stats().Sent < n {
			time.Sleep(200 * time.Microsecond) // polling the counter
		}
		drainT += time.Since(start)
		d.Close()
		if err := <-errc; err != nil {
			b.Fatal(err)
		}

		start = time.Now()
		for range n {
			if _, err := bus.Publish(ctx, "bench.sync", benchPayload, facade.PublishOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		syncT += time.Since(start)

		start = time.Now()
		futures := make([]facade.PublishFuture, 0, n)
		for range n {
			f, err := bus.PublishAsync(ctx, "bench.async", benchPayload, facade.PublishOptions{})
			if err != nil {
				b.Fatal(err)
			}
			futures = append(futures, f)
		}
		for _, f := range futures {
			if _, err := f.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
		asyncT += time.Since(start)
	}
	total := float64(n * b.N)
	drainRate, syncRate, asyncRate := total/drainT.Seconds(), total/syncT.Seconds(), total/asyncT.Seconds()
	b.ReportMetric(float64(drainT.Nanoseconds())/total, "ns/op")
	b.ReportMetric(drainRate, "drain_rec/s")
	b.ReportMetric(syncRate, "publish_rec/s")
	b.ReportMetric(asyncRate, "async_rec/s")
	b.ReportMetric(drainRate/syncRate, "drain/publish")
	b.ReportMetric(drainRate/asyncRate, "drain/async")
}

func addBench(b *testing.B, s *outbox.Store, topic string, n int) {
	b.Helper()
	ctx := context.Background()
	recs := make([]outbox.Record, n)
	for i := range recs {
		recs[i] = outbox.Record{Topic: topic, Payload: benchPayload}
	}
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.AddMany(ctx, tx, recs); err != nil {
		tx.Rollback()
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLatency measures end-to-end latency at a steady 500 records/s for
// 3 seconds: from the start of a service's Commit (one record per
// transaction) to the event reaching a subscriber of the topic. "notify"
// calls Drainer.Notify after each commit; "poll" relies on the 250ms
// PollInterval; "direct" is the baseline, publishing through the bus at the
// same rate (from the Publish call to the subscriber).
func BenchmarkLatency(b *testing.B) {
	const rate, dur = 500, 3 * time.Second
	for _, be := range backends {
		for _, mode := range []string{"notify", "poll"} {
			b.Run(be.name+"/"+mode, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					benchLatency(b, be.dsn(b), mode, rate, dur)
				}
			})
		}
	}
	b.Run("direct", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			benchLatency(b, "", "direct", rate, dur)
		}
	})
}

func benchLatency(b *testing.B, dsn, mode string, rate int, dur time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bus := newBus(b)
	topic := "bench.latency"

	var mu sync.Mutex
	started := make(map[string]time.Time)
	var lat []time.Duration
	unsub, err := bus.Subscribe(ctx, topic, "latency", func(ctx context.Context, d facade.Delivery) error {
		e := d.Event()
		now := time.Now()
		mu.Lock()
		if t0, ok := started[e.ID]; ok {
			lat = append(lat, now.Sub(t0))
		}
		mu.Unlock()
		return nil
	}, facade.SubscribeOptions{From: facade.FromEarliest})
	if err != nil {
		b.Fatal(err)
	}
	defer unsub.Stop(context.Background())

	var s *outbox.Store
	var d *outbox.Drainer
	if mode != "direct" {
		s = openStore(b, dsn)
		d, err = outbox.NewDrainer(s, bus, outbox.Config{WorkerID: "bench", Retention: -1})
		if err != nil {
			b.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- d.Run(ctx) }()
		defer func() { d.Close(); <-errc }()
	}

	b.ResetTimer()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.Now().Add(dur)
	sent := 0
	for time.Now().Before(end) {
		<-tick.C
		id := facade.NewID()
		t0 := time.Now()
		mu.Lock()
		started[id] = t0
		mu.Unlock()
		if mode == "direct" {
			if _, err := bus.Publish(ctx, topic, benchPayload, facade.PublishOptions{ID: id}); err != nil {
				b.Fatal(err)
			}
		} else {
			tx, err := s.DB().BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Add(ctx, tx, outbox.Record{ID: id, Topic: topic, Payload: benchPayload}); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			if mode == "notify" {
				d.Notify()
			}
		}
		sent++
	}
	elapsed := dur
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		got := len(lat)
		mu.Unlock()
		if got == sent {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("received %d of %d events", got, sent)
		}
		time.Sleep(5 * time.Millisecond) // polling for the last deliveries
	}
	b.StopTimer()
	mu.Lock()
	slices.Sort(lat)
	p := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(p(0.50), "p50_ms")
	b.ReportMetric(p(0.99), "p99_ms")
	b.ReportMetric(p(1), "max_ms")
	b.ReportMetric(float64(sent)/elapsed.Seconds(), "rec/s")
	mu.Unlock()
}
