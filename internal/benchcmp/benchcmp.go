// Package benchcmp runs the contestants of a benchmark side by side in one
// run (raw nats.go first, then the hub's path, then any peer) and reports
// each one's rate, CPU per operation and ratios to the first, so that the
// figures of every comparison in the project read alike.
package benchcmp

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// Contestant is one path of a comparison: Run performs n operations.
type Contestant struct {
	Name string
	Run  func(n int)
}

// Compare times each contestant for n operations per round, in rounds that
// rotate which one starts, and reports every rate and each one's ratio to
// the first (the raw nats.go path). Rounds are short (about 2,000
// operations each) and many, so that load from other processes falls on
// every contestant alike. It also reports each one's CPU per operation
// (the server's share included, all in this process) and the ratio of the
// first's to each other's ("name/raw-by-cpu", 1 when both cost the same):
// the figure that other processes' load does not move.
func Compare(b *testing.B, unit string, cs ...Contestant) {
	cycle := 2 * len(cs)
	rounds := max(b.N/2000/cycle, 1) * cycle
	n := max(b.N/rounds, 1)
	for _, c := range cs {
		c.Run(min(n, 200)) // warm up (streams, consumers, connections)
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
			t0, c0 := time.Now(), ProcessCPU()
			cs[i].Run(n)
			d[i] += time.Since(t0)
			cpu[i] += ProcessCPU() - c0
		}
	}
	b.StopTimer()
	rates := make([]float64, len(cs))
	for i, c := range cs {
		rates[i] = float64(n*rounds) / d[i].Seconds()
		b.ReportMetric(rates[i], c.Name+"-"+unit+"/s")
	}
	for i, c := range cs[1:] {
		b.ReportMetric(rates[i+1]/rates[0], c.Name+"/"+cs[0].Name)
	}
	for i, c := range cs {
		b.ReportMetric(float64(cpu[i].Nanoseconds())/1e3/float64(n*rounds), c.Name+"-cpu-µs/"+strings.TrimSuffix(unit, "s"))
		if i > 0 {
			b.ReportMetric(float64(cpu[0])/float64(cpu[i]), c.Name+"/"+cs[0].Name+"-by-cpu")
		}
	}
}

// ProcessCPU is the CPU time this process has used, user and system.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
