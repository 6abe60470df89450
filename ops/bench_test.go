package ops_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/ops"
)

// The benchmarks fill a topic once and then export it; run them with a
// fixed count, e.g.
//
//	go test -run '^$' -bench ReplayVsRaw -benchtime 3x ./ops
//	go test -run '^$' -bench 'ReplayExport$' -benchtime 1x -timeout 30m ./ops
//
// Each iteration of BenchmarkReplayVsRaw reads the whole range twice: with
// a raw nats.go ordered consumer (same buffer of 1000 messages, metadata
// parsed, no output) and with ops.Export writing NDJSON; it reports both rates and
// their ratio.

func benchPayload(i int) string {
	return `{"pid":` + strconv.Itoa(i) + `,"name":"stt","host":"dev","state":"running"}`
}

// countingWriter discards what it is given and counts bytes and lines.
type countingWriter struct {
	bytes, lines int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.bytes += int64(len(p))
	w.lines += int64(bytes.Count(p, []byte{'\n'}))
	return len(p), nil
}

// rawRead reads seq from..last of the topic with a plain ordered consumer
// and returns the payload bytes read.
func rawRead(b testing.TB, ti *jetstream.TopicInfo, from, last uint64, batch int) int64 {
	ctx := context.Background()
	cons, err := ti.Stream.OrderedConsumer(ctx, njs.OrderedConsumerConfig{
		FilterSubjects: ti.Filters, DeliverPolicy: njs.DeliverByStartSequencePolicy, OptStartSeq: from,
	})
	if err != nil {
		b.Fatal(err)
	}
	it, err := cons.Messages(njs.PullMaxMessages(batch))
	if err != nil {
		b.Fatal(err)
	}
	defer it.Stop()
	var n int64
	for {
		msg, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			b.Fatal(err)
		}
		n += int64(len(msg.Data()))
		if meta.Sequence.Stream >= last {
			return n
		}
	}
}

func BenchmarkReplayVsRaw(b *testing.B) {
	const n = 200_000
	const rounds = 5 // per iteration: n/rounds events each, raw then hub
	const topic = "bench.replay"
	srv := natstest.RunEmbedded(b)
	bus, err := jetstream.New(natstest.InProcessConn(b, srv), jetstream.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bus.Close() })
	publishMany(b, bus, topic, n, benchPayload)
	ti, err := bus.LookupTopic(context.Background(), topic)
	if err != nil {
		b.Fatal(err)
	}
	// The export buffers 1000 of these small messages; so does raw.
	const batch = 1000
	rawRead(b, ti, 1, 1000, batch) // warm up
	var rawD, hubD time.Duration
	var rawBytes, hubBytes int64
	var ratios []float64
	b.ResetTimer()
	for range b.N {
		// Alternate raw and hub on short ranges, so that a burst of load
		// from elsewhere on the machine hits both about equally; the
		// median of the rounds' ratios is the figure to read.
		for r := range rounds {
			from, to := uint64(r*n/rounds+1), uint64((r+1)*n/rounds)
			t0 := time.Now()
			rawBytes += rawRead(b, ti, from, to, batch)
			rd := time.Since(t0)

			w := &countingWriter{}
			q := ops.Query{Topic: topic, From: ops.Position{Kind: ops.PosSeq, Seq: from}, To: ops.Position{Kind: ops.PosSeq, Seq: to}}
			t0 = time.Now()
			st, err := ops.Export(context.Background(), bus, w, q)
			hd := time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			if want := int64(to - from + 1); st.Events != want || w.lines != want || st.LastSeq != to {
				b.Fatalf("export wrote %d events (%d lines), last seq %d; want %d to %d", st.Events, w.lines, st.LastSeq, want, to)
			}
			rawD += rd
			hubD += hd
			hubBytes += w.bytes
			ratios = append(ratios, rd.Seconds()/hd.Seconds())
		}
	}
	b.StopTimer()
	events := float64(n * b.N)
	rawRate, hubRate := events/rawD.Seconds(), events/hubD.Seconds()
	slices.Sort(ratios)
	b.ReportMetric(rawRate, "raw-events/s")
	b.ReportMetric(hubRate, "hub-events/s")
	b.ReportMetric(float64(rawBytes)/1e6/rawD.Seconds(), "raw-payload-MB/s")
	b.ReportMetric(float64(hubBytes)/1e6/hubD.Seconds(), "hub-ndjson-MB/s")
	b.ReportMetric(hubRate/rawRate, "hub/raw")
	b.ReportMetric(ratios[len(ratios)/2], "median-hub/raw")
}

// BenchmarkReplayExport exports 1,000,000 events from a nats-server running
// as a separate process (so this process's heap is the export's alone)
// and samples the heap during the export. It fails if the peak heap grows
// past a bound far below the size of the export, and reports the peak
// figures and VmHWM.
func BenchmarkReplayExport(b *testing.B) {
	const n = 1_000_000
	const topic = "bench.export"
	const maxHeapGrowth = 32 << 20
	p := natstest.StartProcess(b)
	nc, err := nats.Connect(p.URL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	bus, err := jetstream.New(nc, jetstream.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bus.Close() })
	t0 := time.Now()
	publishMany(b, bus, topic, n, benchPayload)
	b.Logf("filled %d events in %v", n, time.Since(t0).Round(time.Millisecond))

	b.ResetTimer()
	for range b.N {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapInuse
		var peakInuse, peakLive atomic.Uint64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				peakInuse.Store(max(peakInuse.Load(), ms.HeapInuse))
				metrics.Read(live)
				peakLive.Store(max(peakLive.Load(), live[0].Value.Uint64()))
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		})
		w := &countingWriter{}
		bw := bufio.NewWriterSize(w, 256<<10)
		t0 := time.Now()
		st, err := ops.Export(context.Background(), bus, bw, ops.Query{Topic: topic})
		d := time.Since(t0)
		close(stop)
		wg.Wait()
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			b.Fatal(err)
		}
		if st.Events != n || w.lines != n {
			b.Fatalf("exported %d events, %d lines; want %d", st.Events, w.lines, n)
		}
		growth := int64(peakInuse.Load()) - int64(base)
		b.ReportMetric(float64(n)/d.Seconds(), "events/s")
		b.ReportMetric(float64(w.bytes)/1e6/d.Seconds(), "MB/s")
		b.ReportMetric(float64(w.bytes)/1e6, "output-MB")
		b.ReportMetric(float64(base)/1e6, "heap-before-MB")
		b.ReportMetric(float64(peakInuse.Load())/1e6, "peak-heap-inuse-MB")
		b.ReportMetric(float64(peakLive.Load())/1e6, "peak-heap-live-MB")
		if hwm, ok := vmHWM(); ok {
			b.ReportMetric(float64(hwm)/1e6, "VmHWM-MB")
		}
		if growth > maxHeapGrowth {
			b.Fatalf("heap grew by %d MB during the export (bound %d MB, output %d MB)",
				growth>>20, maxHeapGrowth>>20, w.bytes>>20)
		}
	}
}

// vmHWM reads the process's peak resident set size from /proc.
func vmHWM() (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err == nil {
				return kb << 10, true
			}
		}
	}
	return 0, false
}
