package jetstream_test

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// contestant is one path of a comparison.
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
