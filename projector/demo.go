package projector

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/eventhub/eventhub/facade"
)

// DemoConfig configures [Demo]. The zero value publishes heartbeats of four
// fake processes on host "demo" every second; "stt" pauses for 25 s every
// 45 s (so it goes stale under the default 15 s StaleAfter, then comes back).
type DemoConfig struct {
	// Topic receives the heartbeats (default "heartbeat.received").
	Topic string
	// Host of the fake processes (default "demo").
	Host string
	// Every is the heartbeat period (default 1s).
	Every time.Duration
	// RunFor and PauseFor shape the flaky process: it sends heartbeats for
	// RunFor (default 20s), then none for PauseFor (default 25s), and again.
	RunFor, PauseFor time.Duration
	// Logger receives publish failures; nil discards them.
	Logger *slog.Logger
}

func (c DemoConfig) withDefaults() DemoConfig {
	if c.Topic == "" {
		c.Topic = DefaultHeartbeats
	}
	if c.Host == "" {
		c.Host = "demo"
	}
	if c.Every <= 0 {
		c.Every = time.Second
	}
	if c.RunFor <= 0 {
		c.RunFor = 20 * time.Second
	}
	if c.PauseFor <= 0 {
		c.PauseFor = 25 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// demoProcs are the fake processes; the first one is the flaky one.
var demoProcs = []struct {
	name     string
	pid      int
	cpu, mem float64
}{
	{"stt", 4101, 35, 420},
	{"tts", 4102, 20, 310},
	{"llm", 4103, 80, 2048},
	{"vision", 4104, 45, 900},
}

// Demo publishes heartbeats of a few fake processes every cfg.Every until ctx
// ends, for `eventhub serve -demo`: together with a [Projector] it shows
// process.state changing (the flaky process goes stale and comes back). It
// blocks, returns nil when ctx ends, and logs (rather than returns) publish
// failures, so a NATS restart does not end the demo.
func Demo(ctx context.Context, pub facade.Publisher, cfg DemoConfig) error {
	cfg = cfg.withDefaults()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x5eed))
	start := time.Now()
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	for {
		elapsed := time.Since(start) % (cfg.RunFor + cfg.PauseFor)
		for i, p := range demoProcs {
			if i == 0 && elapsed >= cfg.RunFor {
				continue // the flaky process is paused
			}
			hb := Heartbeat{
				PID: p.pid, Name: p.name, Host: cfg.Host,
				CPUPct: round1(p.cpu * (0.5 + rng.Float64())),
				MemMB:  round1(p.mem * (0.9 + 0.2*rng.Float64())),
			}
			if _, err := facade.PublishJSON(ctx, pub, cfg.Topic, hb, facade.PublishOptions{}); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				cfg.Logger.Warn("demo heartbeat", "process", p.name, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func round1(v float64) float64 { return float64(int(v*10+0.5)) / 10 }
