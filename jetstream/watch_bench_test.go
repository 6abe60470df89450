package jetstream_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

// BenchmarkWatch: a watch up to the end of its current values, of every
// key ("prefix=all") and of one key prefix (1/50 of the keys), beside raw
// nats.go's key-value watcher of a bucket holding the same keys (with dots
// for colons, so that the server filters a prefix: "host-7.>"), on the
// same server and connection. raw/hub ≥ 1: the hub is as fast.
func BenchmarkWatch(b *testing.B) {
	for _, keys := range []int{1000, 10_000} {
		for _, prefix := range []string{"", "host-7:"} {
			name := "all"
			if prefix != "" {
				name = "1of50"
			}
			b.Run(fmt.Sprintf("keys=%d/prefix=%s", keys, name), func(b *testing.B) {
				benchWatch(b, keys, prefix)
			})
		}
	}
}

func benchWatch(b *testing.B, keys int, prefix string) {
	bus, _ := newKeyedBench(b, keys)
	ctx := context.Background()
	kv, err := bus.JetStream().CreateKeyValue(ctx, njs.KeyValueConfig{Bucket: "benchwatch", History: 1})
	if err != nil {
		b.Fatal(err)
	}
	data := payloadOf(128)
	want := 0
	for i := range keys {
		if _, err := kv.Put(ctx, strings.ReplaceAll(benchKey(i), ":", "."), data); err != nil {
			b.Fatal(err)
		}
		if strings.HasPrefix(benchKey(i), prefix) {
			want++
		}
	}
	filter := strings.ReplaceAll(prefix, ":", ".") + ">"
	var rawD, hubD time.Duration
	for b.Loop() {
		t0 := time.Now()
		w, err := kv.Watch(ctx, filter)
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for e := range w.Updates() {
			if e == nil {
				break
			}
			got++
		}
		_ = w.Stop()
		rawD += time.Since(t0)
		if got != want {
			b.Fatalf("raw watch: %d keys, want %d", got, want)
		}
		t0 = time.Now()
		got = 0
		sub, err := bus.Watch(ctx, "bench.kv", facade.WatchOptions{KeyPrefix: prefix}, func(e *facade.EventRecord) {
			if e != nil {
				got++
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		hubD += time.Since(t0) // Watch returns after the marker
		_ = sub.Stop(ctx)
		if got != want {
			b.Fatalf("hub watch: %d keys, want %d", got, want)
		}
	}
	b.ReportMetric(float64(rawD.Nanoseconds())/float64(b.N), "raw-ns/watch")
	b.ReportMetric(float64(hubD.Nanoseconds())/float64(b.N), "hub-ns/watch")
	b.ReportMetric(float64(rawD)/float64(hubD), "raw/hub")
}
