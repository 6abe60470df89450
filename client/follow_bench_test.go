package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/gateway"
	"github.com/eventhub/eventhub/internal/benchcmp"
)

// BenchmarkFollowDelivered: what the Go client costs per delivered event.
// A child process (this test binary, TestHelperFollowClients) opens Conns
// clients that each follow one topic live (mode "live") or subscribe to it
// in a group of their own with auto-ack (mode "group"); this process runs
// the hub and publishes Events events. The child reports its own CPU time,
// allocations and the time from the first to the last delivery, so the
// figures are the client's alone:
//
//	go test -run XXX -bench FollowDelivered -benchtime 1x ./client/
//
// EVENTHUB_BENCH_NOBATCH=1 runs the clients without batched frames.
// EVENTHUB_FOLLOW_PROFILE names a file for a CPU profile of the child.
//
// Metrics: client-µs/event (CPU per delivered event, user + system),
// allocs/event and events/s (deliveries over all connections).
func BenchmarkFollowDelivered(b *testing.B) {
	cases := []followSpec{
		{Mode: "live", Conns: 100, Events: 5_000},
		{Mode: "live", Conns: 1000, Events: 500},
		{Mode: "group", Conns: 100, Events: 2_000},
	}
	for _, tc := range cases {
		b.Run(fmt.Sprintf("%s-%dconn-%dev", tc.Mode, tc.Conns, tc.Events), func(b *testing.B) {
			env := newBenchEnv(b, gateway.Config{MaxInflightPerSub: benchWindow()})
			for i := range b.N {
				spec := tc
				spec.URL = env.url
				spec.Topic = fmt.Sprintf("fbench.%s.%d.%d", tc.Mode, i, time.Now().UnixNano())
				r := runFollowClients(b, env, spec)
				n := float64(r.Delivered)
				b.ReportMetric(r.CPU*1e6/n, "client-µs/event")
				b.ReportMetric(float64(r.Allocs)/n, "allocs/event")
				b.ReportMetric(n/r.Seconds, "events/s")
			}
		})
	}
}

type followSpec struct {
	Mode          string // "live" or "group"
	URL, Topic    string
	Conns, Events int
}

type followResult struct {
	Delivered int64
	CPU       float64 // seconds, from ready to the last delivery
	Seconds   float64 // from the first delivery to the last
	Allocs    uint64  // heap allocations, from ready to the last delivery
	Err       string
}

const followEnv = "EVENTHUB_FOLLOW_CLIENTS"

// runFollowClients starts the child process, publishes spec.Events to
// spec.Topic once it is ready and returns its result.
func runFollowClients(b *testing.B, env *benchEnv, spec followSpec) followResult {
	b.Helper()
	js, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperFollowClients$")
	cmd.Env = append(os.Environ(), followEnv+"="+string(js))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		stdin.Close()
		_ = cmd.Wait()
	}()
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		b.Fatalf("follow clients: %q %v", line, err)
	}
	ctx := context.Background()
	futs := make([]facade.PublishFuture, 0, spec.Events)
	for range spec.Events {
		f, err := env.bus.PublishAsync(ctx, spec.Topic, payload128, facade.PublishOptions{})
		if err != nil {
			b.Fatal(err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		if _, err := f.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	line, err := out.ReadString('\n')
	var r followResult
	if err != nil || !strings.HasPrefix(line, "result ") || json.Unmarshal([]byte(line[len("result "):]), &r) != nil {
		b.Fatalf("follow clients: %q %v", line, err)
	}
	if r.Err != "" {
		b.Fatalf("follow clients: %s", r.Err)
	}
	return r
}

// TestHelperFollowClients is the child process of BenchmarkFollowDelivered.
// It does nothing unless EVENTHUB_FOLLOW_CLIENTS is set.
func TestHelperFollowClients(t *testing.T) {
	js := os.Getenv(followEnv)
	if js == "" {
		t.Skip("helper process")
	}
	var spec followSpec
	if err := json.Unmarshal([]byte(js), &spec); err != nil {
		t.Fatal(err)
	}
	r := followClients(spec)
	line, _ := json.Marshal(r)
	fmt.Printf("result %s\n", line)
	_, _ = io.Copy(io.Discard, os.Stdin)
}

func followClients(spec followSpec) followResult {
	ctx := context.Background()
	target := int64(spec.Conns) * int64(spec.Events)
	var delivered atomic.Int64
	var first, last atomic.Int64 // unix ns
	done := make(chan struct{})
	count := func() {
		n := delivered.Add(1)
		if n == 1 {
			first.Store(time.Now().UnixNano())
		}
		if n == target {
			last.Store(time.Now().UnixNano())
			close(done)
		}
	}
	clients := make([]*Client, spec.Conns)
	defer func() {
		var wg sync.WaitGroup
		for _, c := range clients {
			if c != nil {
				wg.Go(func() { c.Close() })
			}
		}
		wg.Wait()
	}()
	var wg sync.WaitGroup
	var firstErr atomic.Value
	sem := make(chan struct{}, 32)
	for i := range clients {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := Dial(ctx, spec.URL, Config{NoBatch: benchNoBatch()})
			if err != nil {
				firstErr.Store(err.Error())
				return
			}
			clients[i] = c
			switch spec.Mode {
			case "live":
				_, err = c.Follow(ctx, spec.Topic, facade.AfterNow, func(*facade.EventRecord) { count() })
			default:
				_, err = c.Subscribe(ctx, spec.Topic, fmt.Sprintf("g%d", i), func(context.Context, facade.Delivery) error {
					count()
					return nil
				}, facade.SubscribeOptions{From: facade.FromEarliest})
			}
			if err != nil {
				firstErr.Store(err.Error())
			}
		})
	}
	wg.Wait()
	if e, _ := firstErr.Load().(string); e != "" {
		return followResult{Err: e}
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := benchcmp.ProcessCPU()
	if path := os.Getenv("EVENTHUB_FOLLOW_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return followResult{Err: err.Error()}
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return followResult{Err: err.Error()}
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Println("ready")
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		return followResult{Err: fmt.Sprintf("%d of %d delivered", delivered.Load(), target)}
	}
	cpu := benchcmp.ProcessCPU() - cpu0
	runtime.ReadMemStats(&m1)
	return followResult{
		Delivered: target,
		CPU:       cpu.Seconds(),
		Seconds:   time.Duration(last.Load() - first.Load()).Seconds(),
		Allocs:    m1.Mallocs - m0.Mallocs,
	}
}
