package watermill_test

import (
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
)

// These are the jetstream package's benchmark helpers, so that the figures
// here read like the ones of its benchmarks.

const benchWindow = 4000

// contestant is one path of a three-way comparison.
type contestant struct {
	name string
	run  func(n int)
}

// compareAll times each contestant for n operations per round, in rounds
// that rotate which one starts, and reports every rate and each one's ratio
// to the first (the raw nats.go path). Rounds are short (about 2,000
// operations each) and many, so that load from other processes falls on
// every contestant alike. It also reports each one's CPU per operation (the server's share
// included, all in this process) and the ratio of the first's to each
// other's ("name/raw-by-cpu", 1 when both cost the same): the figure that
// other processes' load does not move.
func compareAll(b *testing.B, unit string, cs ...contestant) {
	cycle := 2 * len(cs)
	rounds := max(b.N/2000/cycle, 1) * cycle
	n := max(b.N/rounds, 1)
	for _, c := range cs {
		c.run(min(n, 200)) // warm up (streams, consumers, connections)
	}
	d := make([]time.Duration, len(cs))
	cpu := make([]time.Duration, len(cs))
	b.ResetTimer()
	for r := range rounds {
		for k := range cs {
			i := (r + k) % len(cs)
			if r%2 == 1 {
				i = (r + len(cs) - k) % len(cs)
			}
			t0, c0 := time.Now(), processCPU()
			cs[i].run(n)
			d[i] += time.Since(t0)
			cpu[i] += processCPU() - c0
		}
	}
	b.StopTimer()
	rates := make([]float64, len(cs))
	for i, c := range cs {
		rates[i] = float64(n*rounds) / d[i].Seconds()
		b.ReportMetric(rates[i], c.name+"-"+unit+"/s")
	}
	for i, c := range cs[1:] {
		b.ReportMetric(rates[i+1]/rates[0], c.name+"/"+cs[0].name)
	}
	for i, c := range cs {
		b.ReportMetric(float64(cpu[i].Nanoseconds())/1e3/float64(n*rounds), c.name+"-cpu-µs/"+strings.TrimSuffix(unit, "s"))
		if i > 0 {
			b.ReportMetric(float64(cpu[0])/float64(cpu[i]), c.name+"/"+cs[0].name+"-by-cpu")
		}
	}
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// payloadOf is a JSON string payload of size bytes.
func payloadOf(size int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("x", size-2) + `"`)
}

// rawPublishAsync publishes m asynchronously and, when nats.go gave up
// waiting for room in its window (ErrTooManyStalledMsgs), waits for the
// pending publishes and tries again.
func rawPublishAsync(b *testing.B, js njs.JetStream, m *nats.Msg) {
	for attempt := 0; ; attempt++ {
		_, err := js.PublishMsgAsync(m)
		if err == nil {
			return
		}
		if !errors.Is(err, njs.ErrTooManyStalledMsgs) || attempt == 20 {
			b.Fatal(err)
		}
		<-js.PublishAsyncComplete()
	}
}
