package hub_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/internal/benchcmp"
)

// p99 returns the 99th percentile of ds, in milliseconds.
func p99(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[min(len(s)-1, len(s)*99/100)]) / float64(time.Millisecond)
}

// BenchmarkNativeConnect measures what a native client's connect costs
// when the hub holds 1,000 streams (bench.t0 … bench.t999, a group on
// every tenth): 1 or 8 loops connect and disconnect at once (b.N connects
// each, at least 20), each as its own principal, while another principal
// publishes (acknowledged) to its own topic. Reported: the connects' p99
// and failures, the CPU a connect costs the process (hub and client), and
// the publisher's p99 idle and under the connects.
//
// The loops' tokens hold rules that begin with a wildcard ("*.t7"), which
// reach one stream, but are expanded over the first segments of every
// topic: looked up in the catalogue the hub keeps in memory, not listed
// from JetStream on each connect.
func BenchmarkNativeConnect(b *testing.B) {
	h, err := hub.Start(b.Context(), hub.Config{NATS: hub.NATSConfig{Memory: true, DataDir: b.TempDir()},
		Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Shutdown(context.Background()) })
	ctx := context.Background()
	const streams = 1000
	for i := range streams {
		topic := fmt.Sprint("bench.t", i)
		if i%10 == 0 {
			makeGroup(b, h, topic, "g")
		} else if _, err := h.Bus.Publish(ctx, topic, []byte(`0`), facade.PublishOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := h.Bus.Publish(ctx, "pub.topic", []byte(`0`), facade.PublishOptions{}); err != nil {
		b.Fatal(err)
	}
	url := h.Bus.Server().ClientURL()
	tok := func(subject string, scopes ...string) string {
		t, err := auth.MintHS256(secret, auth.MintClaims{Subject: subject, Scopes: scopes, TTL: time.Hour}, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		return t
	}
	pc, err := nats.Connect(url, nats.Token(tok("publisher", "publish:pub.topic")))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pc.Close)
	pjs, err := njs.New(pc)
	if err != nil {
		b.Fatal(err)
	}
	publish := func() time.Duration {
		t0 := time.Now()
		if _, err := pjs.Publish(ctx, "pub.topic", []byte(`1`)); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	var idle []time.Duration
	for range 500 {
		idle = append(idle, publish())
	}
	for _, c := range []struct {
		name   string
		loops  int
		scopes []string
	}{
		{"lead-1-loop", 1, []string{"publish:*.t7", "subscribe:*.t7"}},
		{"lead-8-loops", 8, []string{"publish:*.t7", "subscribe:*.t7"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			loops := c.loops
			per := max(b.N, 20)
			cpu0 := benchcmp.ProcessCPU()
			var (
				mu       sync.Mutex
				connects []time.Duration
				failed   atomic.Int64
				wg       sync.WaitGroup
				done     = make(chan struct{})
			)
			b.ResetTimer()
			for l := range loops {
				token := tok(fmt.Sprint(c.name, "-loop", l), c.scopes...)
				wg.Go(func() {
					for range per {
						t0 := time.Now()
						nc, err := nats.Connect(url, nats.Token(token), nats.NoReconnect())
						d := time.Since(t0)
						if err != nil {
							failed.Add(1)
							b.Logf("connect: %v", err)
							continue
						}
						nc.Close()
						mu.Lock()
						connects = append(connects, d)
						mu.Unlock()
					}
				})
			}
			var loaded []time.Duration
			go func() { wg.Wait(); close(done) }()
		publishing:
			for {
				select {
				case <-done:
					break publishing
				default:
					loaded = append(loaded, publish())
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(benchcmp.ProcessCPU()-cpu0)/float64(time.Millisecond)/float64(loops*per), "cpu-ms/connect")
			b.ReportMetric(p99(connects), "connect-p99-ms")
			b.ReportMetric(float64(failed.Load()), "failed-connects")
			b.ReportMetric(p99(idle), "pub-idle-p99-ms")
			b.ReportMetric(p99(loaded), "pub-loaded-p99-ms")
			b.ReportMetric(p99(loaded)/p99(idle), "pub-p99-loaded/idle")
			if failed.Load() > 0 {
				b.Errorf("%d of %d connects failed", failed.Load(), loops*per)
			}
		})
	}
}

// BenchmarkNativeAccountMemory measures the heap an account of its own
// costs: 500 principals connect natively, each with a token of one topic
// (publish and subscribe: a dozen imports), against the same number of
// admin connections, which get no account; then they all leave, and once
// their accounts are freed, what the freed accounts keep (less what the
// server keeps of the closed connections, measured on the admins').
func BenchmarkNativeAccountMemory(b *testing.B) {
	const principals = 500
	h, err := hub.Start(b.Context(), hub.Config{NATS: hub.NATSConfig{Memory: true, DataDir: b.TempDir()},
		Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Shutdown(context.Background()) })
	makeGroup(b, h, "mem.t", "g")
	url := h.Bus.Server().ClientURL()
	connect := func(scopes ...string) []*nats.Conn {
		var out []*nats.Conn
		for i := range principals {
			t, err := auth.MintHS256(secret, auth.MintClaims{Subject: fmt.Sprint("m", i), Scopes: scopes, TTL: time.Hour}, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			nc, err := nats.Connect(url, nats.Token(t))
			if err != nil {
				b.Fatal(err)
			}
			out = append(out, nc)
		}
		return out
	}
	closeAll := func(ncs []*nats.Conn) {
		for _, nc := range ncs {
			nc.Close()
		}
	}
	for range b.N {
		base := heapInUse()
		admins := connect("admin")
		withConns := heapInUse()
		closeAll(admins)
		// The server keeps what it knew of recently closed connections.
		afterAdmins := heapInUse()
		closed := afterAdmins - min(afterAdmins, base)
		scoped := connect("publish:mem.t", "subscribe:mem.t")
		withAccounts := heapInUse()
		closeAll(scoped)
		deadline := time.Now().Add(30 * time.Second)
		for held, _ := h.NativeAccounts(); held > 0; held, _ = h.NativeAccounts() {
			if time.Now().After(deadline) {
				b.Fatalf("%d accounts still held", held)
			}
			time.Sleep(50 * time.Millisecond)
		}
		freed := heapInUse()
		kb := func(d int64) float64 { return float64(d) / principals / 1024 }
		b.ReportMetric(kb(int64(withAccounts)-int64(afterAdmins)-(int64(withConns)-int64(base))), "KB/account")
		b.ReportMetric(kb(int64(freed)-int64(afterAdmins)-int64(closed)), "KB/freed-account")
	}
}
