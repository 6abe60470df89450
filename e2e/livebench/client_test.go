package livebench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/centrifugal/centrifuge-go"
	"github.com/nats-io/nats.go"

	"github.com/eventhub/eventhub/client"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/benchcmp"
)

// The client process: TestHelperLiveClients, run by the benchmarks as the
// test binary with EVENTHUB_LIVEBENCH_CLIENT set to a JSON clientSpec. It
// opens the connections, subscribes each to the topic, prints "ready",
// then prints "p <n>" whenever the slowest live connection has n events,
// and "done" once every live connection has spec.Events. When its stdin
// closes it closes the connections and prints "result <JSON clientResult>".

const clientEnv = "EVENTHUB_LIVEBENCH_CLIENT"

// Contestants.
const (
	kindHub        = "hub"
	kindCentrifuge = "centrifuge"
	kindNATS       = "nats"
)

type clientSpec struct {
	Kind   string // kindHub, kindCentrifuge or kindNATS
	URL    string
	Topic  string
	Conns  int
	Events int  // per connection; 0: idle, never "done"
	Lat    bool // measure publish → receive latency from the payload's "t"
}

type clientResult struct {
	Delivered int64   // events received, all connections
	Dropped   int     // connections that ended before the client closed them
	P50, P99  float64 // latency, ms (Lat only)
	Max       float64 // ms
	Samples   int64
	CPU       float64 // the client process's CPU seconds, from ready to the last delivery
	FirstErr  string  // of the dropped connections
}

// TestHelperLiveClients is the client process of the benchmarks; it does
// nothing unless EVENTHUB_LIVEBENCH_CLIENT is set.
func TestHelperLiveClients(t *testing.T) {
	raw := os.Getenv(clientEnv)
	if raw == "" {
		t.Skip("client process of the live benchmarks")
	}
	var spec clientSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	raiseFileLimit()
	out := bufio.NewWriter(os.Stdout)
	res, err := runClients(spec, out, os.Stdin)
	if err != nil {
		fmt.Fprintf(out, "error %v\n", err)
		_ = out.Flush()
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	fmt.Fprintf(out, "result %s\n", b)
	_ = out.Flush()
}

// conn is one client connection.
type conn struct {
	count   atomic.Int64
	ended   atomic.Bool
	errOnce sync.Once
	err     error      // set once, before ended
	histMu  sync.Mutex // a client may call back on more than one goroutine
	hist    *latHist
	close   func()
	_       [32]byte // keep counters of neighbours off one cache line
}

func runClients(spec clientSpec, out *bufio.Writer, stdin io.Reader) (*clientResult, error) {
	conns := make([]*conn, spec.Conns)
	var (
		wg      sync.WaitGroup
		dialErr atomic.Value
		sem     = make(chan struct{}, 64)
	)
	for i := range conns {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c := &conn{}
			if spec.Lat {
				c.hist = new(latHist)
			}
			var err error
			switch spec.Kind {
			case kindHub:
				err = c.dialHub(spec)
			case kindCentrifuge:
				err = c.dialCentrifuge(spec)
			case kindNATS:
				err = c.dialNATS(spec)
			default:
				err = fmt.Errorf("unknown kind %q", spec.Kind)
			}
			if err != nil {
				dialErr.CompareAndSwap(nil, fmt.Errorf("connection %d: %w", i, err))
				return
			}
			conns[i] = c
		})
	}
	wg.Wait()
	if err, _ := dialErr.Load().(error); err != nil {
		for _, c := range conns {
			if c != nil {
				c.close()
			}
		}
		return nil, err
	}
	fmt.Fprintln(out, "ready")
	_ = out.Flush()
	// The client CPU of a run: from ready to the last delivery (or to
	// the end, when not every event arrived).
	cpu0 := benchcmp.ProcessCPU()
	var cpuDone atomic.Int64

	// Report the slowest live connection's count until stdin closes.
	stop := make(chan struct{})
	monitored := make(chan struct{})
	go func() {
		defer close(monitored)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		last, doneSent := int64(-1), false
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			low := int64(math.MaxInt64)
			for _, c := range conns {
				if !c.ended.Load() {
					low = min(low, c.count.Load())
				}
			}
			if low == math.MaxInt64 { // every connection ended
				low = 0
			}
			if low != last {
				last = low
				fmt.Fprintf(out, "p %d\n", low)
			}
			if spec.Events > 0 && !doneSent && low >= int64(spec.Events) {
				doneSent = true
				cpuDone.Store(int64(benchcmp.ProcessCPU() - cpu0))
				fmt.Fprintln(out, "done")
			}
			_ = out.Flush()
		}
	}()
	_, _ = io.Copy(io.Discard, stdin)
	close(stop)
	<-monitored
	cpu := time.Duration(cpuDone.Load())
	if cpu == 0 {
		cpu = benchcmp.ProcessCPU() - cpu0
	}

	// The result is taken before the connections close: a client with a
	// backlog of events (centrifuge-go queues them without bound) may
	// take long to close.
	res := &clientResult{CPU: cpu.Seconds()}
	var all latHist
	for _, c := range conns {
		if c.ended.Load() {
			res.Dropped++
			if res.FirstErr == "" && c.err != nil {
				res.FirstErr = c.err.Error()
			}
		}
		res.Delivered += c.count.Load()
		if c.hist != nil {
			c.histMu.Lock()
			all.merge(c.hist)
			c.histMu.Unlock()
		}
	}
	if spec.Lat {
		res.Samples = all.n
		res.P50, res.P99, res.Max = all.quantile(0.50), all.quantile(0.99), float64(all.max)/1e6
	}
	var closing sync.WaitGroup
	for _, c := range conns {
		closing.Go(c.close)
	}
	closed := make(chan struct{})
	go func() { closing.Wait(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second): // the process ends anyway
	}
	return res, nil
}

// dialHub follows the topic with eventhub's Go client (batched frames,
// its default).
func (c *conn) dialHub(spec clientSpec) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, spec.URL, client.Config{NoReconnect: true, HandshakeTimeout: 30 * time.Second})
	if err != nil {
		return err
	}
	var closing atomic.Bool
	c.close = func() { closing.Store(true); _ = cl.Close() }
	sub, err := cl.Follow(ctx, spec.Topic, facade.AfterNow, func(e *facade.EventRecord) {
		c.record(e.Payload)
		c.count.Add(1)
	})
	if err != nil {
		return err
	}
	go func() {
		<-sub.Done()
		if !closing.Load() {
			c.end(fmt.Errorf("subscription ended: %w", sub.Err()))
		}
	}()
	return nil
}

// dialCentrifuge subscribes to the channel with centrifuge-go (JSON
// protocol, as the other contestants speak JSON).
func (c *conn) dialCentrifuge(spec clientSpec) error {
	cl := centrifuge.NewJsonClient(spec.URL, centrifuge.Config{
		Name: "bench", HandshakeTimeout: 30 * time.Second, ReadTimeout: 30 * time.Second,
	})
	var closing atomic.Bool
	c.close = func() { closing.Store(true); cl.Close() }
	cl.OnDisconnected(func(e centrifuge.DisconnectedEvent) {
		if !closing.Load() {
			c.end(fmt.Errorf("disconnected: %d %s", e.Code, e.Reason))
		}
	})
	// centrifuge-go reconnects by itself (through "connecting"): events
	// published meanwhile are lost to it, so a reconnect counts as a drop.
	var connected atomic.Bool
	cl.OnConnected(func(centrifuge.ConnectedEvent) { connected.Store(true) })
	cl.OnConnecting(func(e centrifuge.ConnectingEvent) {
		if connected.Load() && !closing.Load() {
			c.end(fmt.Errorf("reconnecting: %d %s", e.Code, e.Reason))
		}
	})
	sub, err := cl.NewSubscription(spec.Topic)
	if err != nil {
		return err
	}
	subscribed := make(chan error, 1)
	sub.OnSubscribed(func(centrifuge.SubscribedEvent) { subscribed <- nil })
	sub.OnError(func(e centrifuge.SubscriptionErrorEvent) {
		select {
		case subscribed <- e.Error:
		default:
		}
	})
	sub.OnPublication(func(e centrifuge.PublicationEvent) {
		c.record(e.Data)
		c.count.Add(1)
	})
	if err := cl.Connect(); err != nil {
		return err
	}
	if err := sub.Subscribe(); err != nil {
		return err
	}
	select {
	case err = <-subscribed:
	case <-time.After(30 * time.Second):
		err = errors.New("not subscribed in 30s")
	}
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	return nil
}

// end marks the connection as dropped.
func (c *conn) end(err error) {
	c.errOnce.Do(func() { c.err = err })
	c.ended.Store(true)
}

func (c *conn) dialNATS(spec clientSpec) error {
	closed := make(chan struct{})
	nc, err := nats.Connect(spec.URL,
		nats.Timeout(30*time.Second),
		nats.NoReconnect(),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { c.end(err) }))
	if err != nil {
		return err
	}
	var closing atomic.Bool
	c.close = func() { closing.Store(true); nc.Close() }
	go func() {
		<-closed
		if !closing.Load() {
			c.end(errors.New("connection closed"))
		}
	}()
	if _, err := nc.Subscribe(spec.Topic, func(m *nats.Msg) {
		c.record(m.Data)
		c.count.Add(1)
	}); err != nil {
		return err
	}
	return nc.Flush()
}

// record notes the latency of one event, from the publish time the
// payload carries as "t" (Unix ns).
func (c *conn) record(m []byte) {
	if c.hist == nil {
		return
	}
	i := bytes.Index(m, []byte(`"t":`))
	if i < 0 {
		return
	}
	var t int64
	for _, ch := range m[i+4:] {
		if ch < '0' || ch > '9' {
			break
		}
		t = t*10 + int64(ch-'0')
	}
	c.histMu.Lock()
	c.hist.add(time.Now().UnixNano() - t)
	c.histMu.Unlock()
}

// latHist is a log-linear histogram of latencies in ns: 16 buckets per
// power of two (about 4 % wide).
type latHist struct {
	b   [64 * 16]int64
	n   int64
	max int64
}

func latBucket(ns int64) int {
	if ns < 16 {
		return int(max(ns, 0))
	}
	e := bits.Len64(uint64(ns)) - 5 // ns has e+5 bits: keep the top 5
	return (e+1)*16 + int(uint64(ns)>>e) - 16
}

// latLow is the smallest value of bucket i.
func latLow(i int) int64 {
	if i < 16 {
		return int64(i)
	}
	e := i/16 - 1
	return int64(i%16+16) << e
}

func (h *latHist) add(ns int64) {
	h.b[latBucket(ns)]++
	h.n++
	h.max = max(h.max, ns)
}

func (h *latHist) merge(o *latHist) {
	for i, v := range o.b {
		h.b[i] += v
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile in ms: the upper bound of the bucket holding it.
func (h *latHist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	var seen int64
	for i, v := range h.b {
		seen += v
		if seen >= rank {
			return float64(min(latLow(i+1), h.max)) / 1e6
		}
	}
	return float64(h.max) / 1e6
}

// raiseFileLimit lifts the soft limit on open files to the hard one:
// every connection is a file descriptor on both sides.
func raiseFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
	return l.Cur
}

// parseCount parses the n of a "p <n>" line.
func parseCount(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
