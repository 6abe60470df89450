package idempotent_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/idempotent"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/jetstream"
)

// consume publishes n events to a new topic and measures how long group
// takes to handle them all with h (MaxInFlight 1: one event at a time, so
// the helper's per-event cost is not hidden by concurrency).
func consume(b *testing.B, bus *jetstream.Bus, topic string, n int, h func(count *atomic.Int64) facade.Handler) time.Duration {
	b.Helper()
	ctx := context.Background()
	for i := range n {
		if _, err := bus.PublishAsync(ctx, topic, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), facade.PublishOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	var count atomic.Int64
	done := make(chan struct{})
	inner := h(&count)
	handler := func(ctx context.Context, d facade.Delivery) error {
		err := inner(ctx, d)
		if count.Add(1) == int64(n) {
			close(done)
		}
		return err
	}
	start := time.Now()
	sub, err := bus.Subscribe(ctx, topic, "bench", handler, facade.SubscribeOptions{From: facade.FromEarliest, MaxInFlight: 1})
	if err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatal("events not consumed in 5 minutes")
	}
	elapsed := time.Since(start)
	_ = sub.Stop(ctx)
	return elapsed
}

// BenchmarkKV compares a handler wrapped by the KV store with the bare
// handler (which only acks), on one embedded server, alternating rounds.
// ratio = bare time / wrapped time (1: free; 0.5: twice as slow).
func BenchmarkKV(b *testing.B) {
	srv := natstest.RunEmbedded(b)
	bus, err := jetstream.New(natstest.InProcessConn(b, srv), jetstream.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bus.Close() })
	if _, err := bus.Publish(b.Context(), "bench.kv.0", json.RawMessage(`{}`), facade.PublishOptions{}); err != nil {
		b.Fatal(err)
	}
	kv, err := idempotent.NewKV(b.Context(), bus, idempotent.KVConfig{})
	if err != nil {
		b.Fatal(err)
	}
	noop := func(context.Context, *facade.EventRecord) error { return nil }
	var bare, wrapped time.Duration
	n := max(b.N, 200)
	b.ResetTimer()
	for round := range 2 {
		bare += consume(b, bus, fmt.Sprintf("bench.kv.bare%d", round), n, func(*atomic.Int64) facade.Handler {
			return func(ctx context.Context, d facade.Delivery) error { return noop(ctx, d.Event()) }
		})
		wrapped += consume(b, bus, fmt.Sprintf("bench.kv.wrapped%d", round), n, func(*atomic.Int64) facade.Handler {
			return kv.Wrap(noop)
		})
	}
	b.ReportMetric(float64(bare)/float64(wrapped), "ratio")
	b.ReportMetric(float64(wrapped-bare)/float64(2*n)/1e3, "µs-added/event")
}

// BenchmarkSQL compares, per database, a handler that writes one row in
// its own transaction (what a consumer does without the helper) with the
// same write through the SQL store (the mark inserted in the same
// transaction). ratio = bare time / wrapped time.
func BenchmarkSQL(b *testing.B) {
	for _, be := range sqlBackends {
		b.Run(be.name, func(b *testing.B) {
			srv := natstest.RunEmbedded(b)
			bus, err := jetstream.New(natstest.InProcessConn(b, srv), jetstream.Config{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { bus.Close() })
			db := be.open(b)
			store := newSQLStore(b, db, be.dialect)
			write := func(ctx context.Context, tx *sql.Tx, e *facade.EventRecord) error {
				_, err := tx.ExecContext(ctx, insertEffect(be.dialect), e.ID)
				return err
			}
			var bare, wrapped time.Duration
			n := max(b.N, 200)
			b.ResetTimer()
			for round := range 2 {
				bare += consume(b, bus, fmt.Sprintf("bench.sql.bare%d", round), n, func(*atomic.Int64) facade.Handler {
					return func(ctx context.Context, d facade.Delivery) error {
						tx, err := db.BeginTx(ctx, nil)
						if err != nil {
							return err
						}
						defer tx.Rollback()
						if err := write(ctx, tx, d.Event()); err != nil {
							return err
						}
						if err := tx.Commit(); err != nil {
							return err
						}
						return d.Ack(ctx)
					}
				})
				wrapped += consume(b, bus, fmt.Sprintf("bench.sql.wrapped%d", round), n, func(*atomic.Int64) facade.Handler {
					return store.Wrap(write)
				})
			}
			b.ReportMetric(float64(bare)/float64(wrapped), "ratio")
			b.ReportMetric(float64(wrapped-bare)/float64(2*n)/1e3, "µs-added/event")
		})
	}
}
