package livebench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventhub/eventhub/internal/benchcmp"
)

const topic = "live.bench"

// rounds is how often each contestant runs each case
// (EVENTHUB_LIVEBENCH_ROUNDS, default 3).
func rounds() int {
	if n, _ := strconv.Atoi(os.Getenv("EVENTHUB_LIVEBENCH_ROUNDS")); n > 0 {
		return n
	}
	return 3
}

// window is how many events a throughput run publishes ahead of the
// slowest connection: below every contestant's outbound queue (the hub's
// 1024 frames, Centrifuge's 1 MiB), so nobody is dropped as a slow client.
func window() int64 {
	if n, _ := strconv.Atoi(os.Getenv("EVENTHUB_LIVEBENCH_WINDOW")); n > 0 {
		return int64(n)
	}
	return 500
}

// contestants are kinds, less those EVENTHUB_LIVEBENCH_ONLY leaves out.
func contestants(kinds ...string) []string {
	only := os.Getenv("EVENTHUB_LIVEBENCH_ONLY")
	if only == "" {
		return kinds
	}
	var out []string
	for _, k := range kinds {
		if slices.Contains(strings.Split(only, ","), k) {
			out = append(out, k)
		}
	}
	return out
}

// payload is a 128-byte JSON event carrying its publish time as "t".
func payload() []byte {
	p := make([]byte, 0, 128)
	p = append(p, `{"t":`...)
	p = strconv.AppendInt(p, time.Now().UnixNano(), 10)
	p = append(p, `,"pad":"`...)
	for len(p) < 126 {
		p = append(p, 'x')
	}
	return append(p, `"}`...)
}

// clientProc is the client process of one run.
type clientProc struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	low      atomic.Int64  // the slowest live connection's count
	progress chan struct{} // a new low
	done     chan struct{} // every live connection has spec.Events
	exited   chan struct{} // stdout ended
	result   *clientResult // valid after exited
	err      error         // valid after exited
}

// startClients runs the client process and returns once its connections
// are subscribed.
func startClients(tb testing.TB, spec clientSpec) *clientProc {
	tb.Helper()
	js, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLiveClients$", "-test.v")
	cmd.Env = append(os.Environ(), clientEnv+"="+string(js))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &clientProc{
		cmd: cmd, stdin: stdin,
		progress: make(chan struct{}, 1), done: make(chan struct{}), exited: make(chan struct{}),
	}
	ready := make(chan struct{})
	go p.read(stdout, ready)
	select {
	case <-ready:
	case <-p.exited:
		tb.Fatalf("client process: %v (%v)", p.err, cmd.Wait())
	case <-time.After(5 * time.Minute):
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		tb.Fatalf("client process: not ready in 5 minutes")
	}
	return p
}

func (p *clientProc) read(stdout io.Reader, ready chan struct{}) {
	defer close(p.exited)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "p "):
			p.low.Store(parseCount(line[2:]))
			select {
			case p.progress <- struct{}{}:
			default:
			}
		case line == "ready":
			close(ready)
		case line == "done":
			close(p.done)
		case strings.HasPrefix(line, "result "):
			var r clientResult
			if err := json.Unmarshal([]byte(line[7:]), &r); err != nil {
				p.err = err
			}
			p.result = &r
		case strings.HasPrefix(line, "error "):
			p.err = fmt.Errorf("client process: %s", line[6:])
		}
	}
	if p.result == nil && p.err == nil {
		p.err = fmt.Errorf("client process ended without a result (%v)", sc.Err())
	}
}

// finish closes the connections and returns what the client process saw.
func (p *clientProc) finish(tb testing.TB) *clientResult {
	tb.Helper()
	_ = p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(2 * time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	if err := p.cmd.Wait(); err != nil {
		p.err = errors.Join(p.err, err)
	}
	if p.err != nil {
		tb.Fatal(p.err)
	}
	return p.result
}

// stats are the rounds' values of one measure, per contestant.
type stats map[string][]float64

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// report logs median, min and max of each contestant's values, and the
// ratios of the medians hub/centrifuge and hub/nats; under a benchmark it
// also reports them as metrics: "<kind>-<unit>" (with "-min" and "-max")
// and "<unit>-hub/<kind>".
func report(tb testing.TB, unit string, st stats) {
	tb.Helper()
	b, _ := tb.(*testing.B)
	for _, k := range []string{kindHub, kindCentrifuge, kindNATS} {
		v := st[k]
		if len(v) == 0 {
			continue
		}
		if b != nil {
			b.ReportMetric(median(v), k+"-"+unit)
			b.ReportMetric(slices.Min(v), k+"-"+unit+"-min")
			b.ReportMetric(slices.Max(v), k+"-"+unit+"-max")
		}
		tb.Logf("%-10s %-14s median %10.4g  min %10.4g  max %10.4g  (%d rounds)", k, unit, median(v), slices.Min(v), slices.Max(v), len(v))
	}
	hub := st[kindHub]
	for _, k := range []string{kindCentrifuge, kindNATS} {
		if o := st[k]; len(hub) > 0 && len(o) > 0 && median(o) != 0 {
			if b != nil {
				b.ReportMetric(median(hub)/median(o), unit+"-hub/"+k)
			}
			tb.Logf("%-10s %-14s hub/%s %.3g", "", unit, k, median(hub)/median(o))
		}
	}
}

// throughputRun publishes events as fast as the slowest connection takes
// them (at most window() ahead of it) and returns delivered events/s, the
// benchmark process's (the server's) and the client process's CPU µs per
// delivered event, and how many connections were dropped (or, for
// centrifuge-go, reconnected) on the way.
func throughputRun(b testing.TB, kind string, conns, events int) (evps, serverUs, clientUs float64, dropped int) {
	b.Helper()
	s := startServer(b, kind, topic)
	defer s.close()
	cp := startClients(b, clientSpec{Kind: kind, URL: s.url(), Topic: topic, Conns: conns, Events: events})
	runtime.GC()
	w := window()
	deadline := time.After(3 * time.Minute)
	cpu0, t0 := benchcmp.ProcessCPU(), time.Now()
	for i := range events {
		for int64(i)-cp.low.Load() >= w {
			select {
			case <-cp.progress:
			case <-cp.exited:
				b.Fatalf("%s: client process ended: %v", kind, cp.err)
			case <-deadline:
				cp.finish(b)
				b.Fatalf("%s: %d conns: the slowest has %d of %d events after 3 minutes", kind, conns, cp.low.Load(), i)
			}
		}
		if err := s.publish(payload()); err != nil {
			b.Fatalf("%s: publish: %v", kind, err)
		}
	}
	select {
	case <-cp.done:
	case <-cp.exited:
		b.Fatalf("%s: client process ended: %v", kind, cp.err)
	case <-deadline:
		r := cp.finish(b)
		b.Fatalf("%s: %d conns: %d of %d deliveries after 3 minutes (%d connections dropped: %s)",
			kind, conns, r.Delivered, conns*events, r.Dropped, r.FirstErr)
	}
	elapsed, cpu := time.Since(t0), benchcmp.ProcessCPU()-cpu0
	if err := s.settle(); err != nil {
		b.Fatalf("%s: publish: %v", kind, err)
	}
	r := cp.finish(b)
	if r.Dropped > 0 {
		// What the others delivered counts; the case reports the drops.
		b.Logf("%s: %d connections dropped: %s", kind, r.Dropped, r.FirstErr)
	}
	b.Logf("%s %d conns: %d deliveries in %v, server CPU %v, client CPU %.2fs", kind, conns, r.Delivered, elapsed.Round(time.Millisecond), cpu.Round(time.Millisecond), r.CPU)
	n := float64(r.Delivered)
	return n / elapsed.Seconds(), float64(cpu.Microseconds()) / n, r.CPU * 1e6 / n, r.Dropped
}

// BenchmarkLiveThroughput: delivered events/s and server and client CPU
// per delivered event, every event to every connection, publishing as
// fast as the slowest connection keeps up.
func BenchmarkLiveThroughput(b *testing.B) {
	raiseFileLimit()
	for _, tc := range []struct{ conns, events int }{{100, 20_000}, {1000, 2_000}} {
		b.Run(fmt.Sprintf("conns=%d", tc.conns), func(b *testing.B) {
			for range b.N {
				throughputCase(b, rounds(), tc.conns, tc.events)
			}
		})
	}
}

// throughputCase runs throughputRun for each contestant, taking turns,
// reports the medians and ratios, and returns the dropped connections.
func throughputCase(tb testing.TB, rounds, conns, events int) stats {
	evps, srv, cli, drops := stats{}, stats{}, stats{}, stats{}
	kinds := contestants(kindHub, kindCentrifuge, kindNATS)
	for r := range rounds {
		for i := range kinds {
			k := kinds[(i+r)%len(kinds)]
			e, s, c, d := throughputRun(tb, k, conns, events)
			evps[k] = append(evps[k], e)
			srv[k] = append(srv[k], s)
			cli[k] = append(cli[k], c)
			drops[k] = append(drops[k], float64(d))
		}
	}
	report(tb, "ev/s", evps)
	report(tb, "server-us/ev", srv)
	report(tb, "client-us/ev", cli)
	report(tb, "dropped", drops)
	return drops
}

// latencyRun publishes rate events/s for d and returns the client
// process's latency figures and the share of deliveries that arrived.
func latencyRun(b testing.TB, kind string, conns, rate int, d time.Duration) (r *clientResult, delivered float64) {
	b.Helper()
	s := startServer(b, kind, topic)
	defer s.close()
	n := int(d.Seconds() * float64(rate))
	cp := startClients(b, clientSpec{Kind: kind, URL: s.url(), Topic: topic, Conns: conns, Events: n, Lat: true})
	runtime.GC()
	start := time.Now()
	for i := 0; i < n; {
		// Publish what is due, then wait for the next one (pacing, not
		// synchronisation).
		due := min(n, int(time.Since(start).Seconds()*float64(rate))+1)
		for ; i < due; i++ {
			if err := s.publish(payload()); err != nil {
				b.Fatalf("%s: publish: %v", kind, err)
			}
		}
		if i < n {
			time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))))
		}
	}
	select {
	case <-cp.done:
	case <-cp.exited:
		b.Fatalf("%s: client process ended: %v", kind, cp.err)
	case <-time.After(10 * time.Second):
		// Saturated: what arrived within 10 s of the last publish counts,
		// the share below says how much.
	}
	if err := s.settle(); err != nil {
		b.Fatalf("%s: publish: %v", kind, err)
	}
	r = cp.finish(b)
	delivered = float64(r.Delivered) / float64(conns*n)
	b.Logf("%s %d conns × %d/s: p50 %.2fms p99 %.2fms max %.1fms, %.1f%% delivered, %d dropped %s",
		kind, conns, rate, r.P50, r.P99, r.Max, 100*delivered, r.Dropped, r.FirstErr)
	return r, delivered
}

// BenchmarkLiveLatency: publish → receive latency (p50, p99) at a fixed
// publish rate, every event to every connection. The publish time travels
// in the payload; both processes read the same clock. 1,000 connections
// at 2,000 events/s ask for 2 million deliveries a second, more than two
// cores deliver with the clients on the same machine: every contestant is
// saturated there and its latency is that of its queues; 1,000 at 200/s
// is the same fan-out below saturation. 100 connections at 100/s are
// below saturation, at 5,000/s (500,000 deliveries a second) past it.
func BenchmarkLiveLatency(b *testing.B) {
	raiseFileLimit()
	for _, tc := range []struct {
		conns, rate int
		d           time.Duration
	}{{100, 100, 10 * time.Second}, {100, 5000, 5 * time.Second}, {1000, 200, 5 * time.Second}, {1000, 2000, 5 * time.Second}} {
		b.Run(fmt.Sprintf("conns=%d/rate=%d", tc.conns, tc.rate), func(b *testing.B) {
			for range b.N {
				latencyCase(b, rounds(), tc.conns, tc.rate, tc.d)
			}
		})
	}
}

// latencyCase runs latencyRun for each contestant, taking turns, reports
// the medians and ratios, and returns the share of deliveries that arrived.
func latencyCase(tb testing.TB, rounds, conns, rate int, d time.Duration) stats {
	p50, p99, share := stats{}, stats{}, stats{}
	kinds := contestants(kindHub, kindCentrifuge, kindNATS)
	for r := range rounds {
		for i := range kinds {
			k := kinds[(i+r)%len(kinds)]
			res, sh := latencyRun(tb, k, conns, rate, d)
			p50[k] = append(p50[k], res.P50)
			p99[k] = append(p99[k], res.P99)
			share[k] = append(share[k], sh)
		}
	}
	report(tb, "p50-ms", p50)
	report(tb, "p99-ms", p99)
	report(tb, "delivered", share)
	return share
}

// heapAndStack is the benchmark process's live heap and stacks after GC.
func heapAndStack() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse
}

// writeHeapProfile writes the live heap to path.
func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLiveIdleMemory: the server's heap + stack and goroutines per
// idle connection with a live subscription, 1,000 connections.
// EVENTHUB_LIVEBENCH_HEAPPROFILE names a file for the hub's heap profile
// at the measurement.
func BenchmarkLiveIdleMemory(b *testing.B) {
	raiseFileLimit()
	const conns = 1000
	for range b.N {
		mem, gs := stats{}, stats{}
		kinds := contestants(kindHub, kindCentrifuge, kindNATS)
		for r := range rounds() {
			for i := range kinds {
				k := kinds[(i+r)%len(kinds)]
				s := startServer(b, k, topic)
				g0, m0 := runtime.NumGoroutine(), heapAndStack()
				cp := startClients(b, clientSpec{Kind: k, URL: s.url(), Topic: topic, Conns: conns})
				m1, g1 := heapAndStack(), runtime.NumGoroutine()
				if path := os.Getenv("EVENTHUB_LIVEBENCH_HEAPPROFILE"); path != "" && k == kindHub {
					writeHeapProfile(b, path)
				}
				cp.finish(b)
				s.close()
				mem[k] = append(mem[k], float64(int64(m1)-int64(m0))/conns/1024)
				gs[k] = append(gs[k], float64(g1-g0)/conns)
			}
		}
		report(b, "KiB/conn", mem)
		report(b, "goroutines/conn", gs)
	}
}

// BenchmarkLive10k: 10,000 live connections on one topic: delivered
// events/s and CPU per delivery as fast as the slowest connection keeps
// up, then latency at 20 events/s (200,000 deliveries/s). The hub alone
// by default; EVENTHUB_LIVEBENCH_10K names the contestants otherwise
// (e.g. hub,centrifuge). Both processes raise their open-file limit to the
// hard limit; each needs one descriptor per connection.
func BenchmarkLive10k(b *testing.B) {
	limit := raiseFileLimit()
	const conns = 10_000
	if limit < conns+1000 {
		b.Skipf("open-file limit %d is below %d", limit, conns+1000)
	}
	kinds := []string{kindHub}
	if v := os.Getenv("EVENTHUB_LIVEBENCH_10K"); v != "" {
		kinds = strings.Split(v, ",")
	}
	for range b.N {
		evps, srv, cli, p50, p99, share := stats{}, stats{}, stats{}, stats{}, stats{}, stats{}
		for r := range rounds() {
			for i := range kinds {
				k := kinds[(i+r)%len(kinds)]
				e, s, c, _ := throughputRun(b, k, conns, 200)
				evps[k] = append(evps[k], e)
				srv[k] = append(srv[k], s)
				cli[k] = append(cli[k], c)
				res, sh := latencyRun(b, k, conns, 20, 10*time.Second)
				p50[k] = append(p50[k], res.P50)
				p99[k] = append(p99[k], res.P99)
				share[k] = append(share[k], sh)
			}
		}
		report(b, "ev/s", evps)
		report(b, "server-us/ev", srv)
		report(b, "client-us/ev", cli)
		report(b, "p50-ms", p50)
		report(b, "p99-ms", p99)
		report(b, "delivered", share)
	}
}

// TestLiveBenchShort runs the throughput and latency cases once, small,
// with every contestant's client: the harness works, and each contestant
// delivers every event to every connection.
func TestLiveBenchShort(t *testing.T) {
	raiseFileLimit()
	t.Run("throughput", func(t *testing.T) {
		for k, drops := range throughputCase(t, 1, 10, 300) {
			if drops[0] != 0 {
				t.Errorf("%s: %v connections dropped", k, drops[0])
			}
		}
	})
	t.Run("latency", func(t *testing.T) {
		for k, share := range latencyCase(t, 1, 10, 100, time.Second) {
			if share[0] != 1 {
				t.Errorf("%s: %.1f%% of the events delivered", k, 100*share[0])
			}
		}
	})
}
