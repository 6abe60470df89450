package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
)

// BenchmarkLatestByKeyStrategies compares the ways LatestByKey can look up n
// keys of a compacted topic with 20,000 keys: one direct get per key in
// order, direct gets from 16 goroutines, and multi_last requests listing the
// subjects. It is how latestByKeyMultiMin was chosen. ns/key is the figure to
// compare.
func BenchmarkLatestByKeyStrategies(b *testing.B) {
	const total = 20_000
	srv := natstest.RunEmbedded(b)
	bus, err := New(natstest.InProcessConn(b, srv), Config{Topics: []TopicConfig{{Pattern: "strat.kv", Compaction: true}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bus.Close() })
	ctx := context.Background()
	for i := range total {
		for {
			_, err := bus.PublishAsync(ctx, "strat.kv", []byte(fmt.Sprintf(`{"i":%d}`, i)), facade.PublishOptions{Key: fmt.Sprintf("h:p:%d", i)})
			if err == nil {
				break
			}
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				b.Fatal(err)
			}
			<-bus.js.PublishAsyncComplete() // nats.go gave up waiting for room after 200 ms
		}
	}
	<-bus.js.PublishAsyncComplete()
	ti, err := bus.existingTopic(ctx, "strat.kv")
	if err != nil {
		b.Fatal(err)
	}
	strategies := []struct {
		name string
		fn   func(subjects map[string]string, out map[string]*facade.EventRecord) error
	}{
		{"each", func(s map[string]string, out map[string]*facade.EventRecord) error {
			return bus.latestEach(ctx, ti, s, out)
		}},
		{"concurrent16", func(s map[string]string, out map[string]*facade.EventRecord) error {
			return bus.latestConcurrent(ctx, ti, s, out, 16)
		}},
		{"multi", func(s map[string]string, out map[string]*facade.EventRecord) error {
			return bus.latestMulti(ctx, ti, s, out)
		}},
	}
	for _, n := range []int{1, 2, 4, 8, 16, 64, 1000} {
		for _, st := range strategies {
			b.Run(fmt.Sprintf("keys=%d/%s", n, st.name), func(b *testing.B) {
				round := 0
				for b.Loop() {
					subjects := make(map[string]string, n)
					for j := range n {
						k := fmt.Sprintf("h:p:%d", (round*n+j*7919)%total)
						subjects[subjectFor("strat.kv", k)] = k
					}
					round++
					out := make(map[string]*facade.EventRecord, n)
					if err := st.fn(subjects, out); err != nil {
						b.Fatal(err)
					}
					if len(out) != len(subjects) {
						b.Fatalf("%d of %d keys found", len(out), len(subjects))
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
			})
		}
	}
}

// latestConcurrent looks keys up with direct gets from up to workers
// goroutines: the strategy LatestByKey does not use (multi_last is faster
// from a few keys on), kept here to show why.
func (b *Bus) latestConcurrent(ctx context.Context, ti *topicInfo, subjects map[string]string, out map[string]*facade.EventRecord, workers int) error {
	type result struct {
		k string
		e *facade.EventRecord
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan string)
	results := make(chan result)
	var wg sync.WaitGroup
	for range min(workers, len(subjects)) {
		wg.Go(func() {
			for subj := range work {
				raw, err := ti.stream.GetLastMsgForSubject(ctx, subj)
				if errors.Is(err, jetstream.ErrMsgNotFound) {
					continue
				}
				if err != nil {
					cancel(fmt.Errorf("latest of %s: %w", subj, translate(err)))
					continue
				}
				e := fromMsg(raw.Subject, raw.Header, raw.Data, raw.Sequence, raw.Time)
				select {
				case results <- result{subjects[subj], e}:
				case <-ctx.Done():
				}
			}
		})
	}
	go func() {
		defer close(work)
		for subj := range subjects {
			select {
			case work <- subj:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()
	for r := range results {
		r.e.Key = r.k
		out[r.k] = r.e
	}
	return context.Cause(ctx)
}
