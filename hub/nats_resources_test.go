package hub_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
)

// makeGroup makes topic's stream and group through the hub.
func makeGroup(t testing.TB, h *hub.Hub, topic, group string) {
	t.Helper()
	sub, err := h.Bus.Subscribe(context.Background(), topic, group, func(context.Context, facade.Delivery) error { return nil }, facade.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestNativeSeesStreamsMadeAfterStart: a stream and a group an operator
// makes while the hub runs (outside the hub) are granted to the native
// clients that connect afterwards, whose rules reach them by a wildcard.
func TestNativeSeesStreamsMadeAfterStart(t *testing.T) {
	h := jwtHub(t)
	ctx := t.Context()
	js := h.Bus.JetStream()
	if _, err := js.CreateStream(ctx, njs.StreamConfig{Name: "OPS_LATE", Subjects: []string{"late.ops", "late.ops._k.*"}, Storage: njs.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, "OPS_LATE", njs.ConsumerConfig{Durable: "crew", AckPolicy: njs.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	for _, scopes := range [][]string{{"subscribe:late.*"}, {"subscribe:**"}} {
		testutil.CheckFor(t, 10*time.Second, func() error {
			nc, err := nats.Connect(h.Bus.Server().ClientURL(), nats.Token(mintAs(t, "late", scopes...)))
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := njs.New(nc)
			if err != nil {
				return err
			}
			short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			if _, err := js.Consumer(short, "OPS_LATE", "crew"); err != nil {
				return fmt.Errorf("%v: binding to the operator's group: %w", scopes, err)
			}
			return nil
		})
	}
}

// TestNativeAccountsAreFreed: the account of a principal is freed once its
// last connection has left, and the next principals that connect reuse the
// freed accounts, without the imports of their former holders; a
// principal that connects again gets its rights back.
func TestNativeAccountsAreFreed(t *testing.T) {
	h := jwtHub(t)
	ctx := t.Context()
	publishN(t, h, "acct.t", 0, 1)
	publishN(t, h, "acct.u", 0, 1)
	srv := h.Bus.Server()
	const principals = 4
	var conns []*nativeClient
	for i := range principals {
		conns = append(conns, connectNative(t, h, mintAs(t, fmt.Sprint("p", i), "publish:acct.t", "subscribe:acct.t")))
	}
	if held, idle := h.NativeAccounts(); held != principals || idle != 0 {
		t.Fatalf("%d principals connected hold %d accounts (%d idle)", principals, held, idle)
	}
	loaded := srv.NumLoadedAccounts()
	for _, c := range conns {
		c.nc.Close()
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		if held, idle := h.NativeAccounts(); held != 0 || idle != principals {
			return fmt.Errorf("after every connection left: %d accounts held, %d idle", held, idle)
		}
		return nil
	})

	// A principal connecting again works as before.
	again := connectNative(t, h, mintAs(t, "p0", "publish:acct.t", "subscribe:acct.t"))
	live, err := again.nc.SubscribeSync("acct.t")
	if err != nil {
		t.Fatal(err)
	}
	if err := again.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := again.js.Publish(ctx, "acct.t", []byte(`{"n":1}`)); err != nil {
		t.Fatalf("js.Publish after reconnecting: %v", err)
	}
	publishN(t, h, "acct.t", 2, 1)
	for {
		// Its own publish comes first: it is published in its account.
		m, err := live.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("the hub's live event after reconnecting: %v", err)
		}
		if string(m.Data) == `{"n":2}` {
			break
		}
	}
	if _, err := again.js.Stream(ctx, streamOf(t, h, "acct.t")); err != nil {
		t.Fatalf("stream info after reconnecting: %v", err)
	}
	// Another principal takes a freed account: it holds nothing of its
	// former holder's (stream lookups list its own topics only).
	other := connectNative(t, h, mintAs(t, "newcomer", "publish:acct.u", "subscribe:acct.u"))
	if name, err := other.js.StreamNameBySubject(ctx, "acct.t"); err == nil {
		t.Fatalf("a newcomer in a freed account finds the stream %s of its former holder's topic", name)
	}
	if _, err := other.js.StreamNameBySubject(ctx, "acct.u"); err != nil {
		t.Fatalf("the newcomer's own topic: %v", err)
	}
	if n := srv.NumLoadedAccounts(); n != loaded {
		t.Fatalf("the server holds %d accounts, %d before: freed accounts were not reused", n, loaded)
	}
	if held, idle := h.NativeAccounts(); held != 2 || idle != principals-2 {
		t.Fatalf("2 principals connected hold %d accounts (%d idle)", held, idle)
	}
}

// heapInUse is the heap the process holds after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// rss is the process's resident memory (0 where /proc is missing).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, resident uint64
	if _, err := fmt.Sscan(string(b), &size, &resident); err != nil {
		return 0
	}
	return resident * uint64(os.Getpagesize())
}

// TestNativePullFloodIsBounded: a client sending pull requests in a tight
// loop (batch 1, 60 s expiry) has the hub keep a response mapping for
// each: the hub closes its connections once its account holds too many,
// which frees them at once, so the hub's memory stays bounded (the race
// detector may slow the server down so much that the bound is never
// reached).
func TestNativePullFloodIsBounded(t *testing.T) {
	const bound = 64 << 20
	h := jwtHub(t)
	makeGroup(t, h, "zz.top", "g")
	subject := "$JS.API.CONSUMER.MSG.NEXT." + streamOf(t, h, "zz.top") + "." + jetstream.ConsumerName("g", "zz.top", false)
	var disconnects atomic.Int64
	nc, err := nats.Connect(h.Bus.Server().ClientURL(), nats.Token(mintAs(t, "flood", "subscribe:zz.top")),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { disconnects.Add(1) }),
		nats.ReconnectWait(10*time.Millisecond), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Subscribe("_INBOX.flood.>", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	hubAcc := h.Bus.Server().GlobalAccount()
	base, baseRSS := heapInUse(), rss()
	req := []byte(`{"batch":1,"expires":60000000000}`)
	var sent, maxPending int
	var maxGrowth, maxRSS uint64
	start, sample := time.Now(), time.Now()
	for time.Since(start) < 10*time.Second && (disconnects.Load() < 2 || time.Since(start) < 3*time.Second) {
		// Fails while the connection is being closed or reconnected.
		if err := nc.PublishRequest(subject, fmt.Sprint("_INBOX.flood.", sent), req); err == nil {
			sent++
		}
		if time.Since(sample) > 250*time.Millisecond {
			sample = time.Now()
			maxPending = max(maxPending, hubAcc.NumPendingAllResponses())
			if heap := heapInUse(); heap > base {
				maxGrowth = max(maxGrowth, heap-base)
			}
			maxRSS = max(maxRSS, rss())
		}
	}
	t.Logf("%d pulls in %v: %d disconnects, at most %d pending responses, heap at most %.1f MB above the start (resident: %.1f MB)",
		sent, time.Since(start).Round(time.Millisecond), disconnects.Load(), maxPending, float64(maxGrowth)/(1<<20),
		(float64(maxRSS)-float64(baseRSS))/(1<<20))
	// An account may hold 16,384 (auth's maxPendingResponses), counted
	// every 50 ms: more may arrive meanwhile, not as many again.
	if maxPending > 2*16384 {
		t.Errorf("the hub held %d responses for one account (%d disconnects)", maxPending, disconnects.Load())
	}
	if maxGrowth > bound {
		t.Errorf("the hub's heap grew %.1f MB, bound %d MB", float64(maxGrowth)/(1<<20), bound>>20)
	}
	nc.Close()
	// Released at once, but for the pulls JetStream still holds waiting
	// (at most the consumer's MaxWaiting, 512), released when they end.
	testutil.CheckFor(t, 5*time.Second, func() error {
		if n := hubAcc.NumPendingAllResponses(); n > 1024 {
			return fmt.Errorf("%d responses still pending", n)
		}
		return nil
	})
}
