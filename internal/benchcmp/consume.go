package benchcmp

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

// RawConsumeN consumes from cons with nats.go's Consume, acking each
// message, and returns once n messages were acked (sent, not yet
// registered: see WaitAckFloor). The caller stops the returned context.
func RawConsumeN(b *testing.B, cons njs.Consumer, n int, opts ...njs.PullConsumeOpt) njs.ConsumeContext {
	b.Helper()
	var got atomic.Int64
	done := make(chan struct{})
	cc, err := cons.Consume(func(m njs.Msg) {
		_ = m.Ack()
		if got.Add(1) == int64(n) {
			close(done)
		}
	}, opts...)
	if err != nil {
		b.Fatal(err)
	}
	<-done
	return cc
}

// ConsumeN subscribes group to topic from its earliest event, with the
// group's defaults and a handler that only counts, and returns once n
// handler calls returned. The caller stops the subscription, after
// WaitAckFloor if the pass ends when the server has every ack.
func ConsumeN(ctx context.Context, b *testing.B, bus facade.Subscriber, topic, group string, n int) facade.Subscription {
	b.Helper()
	var got atomic.Int64
	done := make(chan struct{})
	sub, err := bus.Subscribe(ctx, topic, group, func(context.Context, facade.Delivery) error {
		if got.Add(1) == int64(n) {
			close(done)
		}
		return nil
	}, facade.SubscribeOptions{From: facade.FromEarliest})
	if err != nil {
		b.Fatal(err)
	}
	<-done
	return sub
}

// WaitAckFloor returns once the server has registered the acks of every
// event up to stream sequence seq on cons (the streams start at 1 and hold
// only the benchmark's events). It polls the consumer's info, pausing
// briefly between requests, so that every contestant's pass ends the same
// way and the polls take little of the CPU being measured.
func WaitAckFloor(ctx context.Context, b *testing.B, cons njs.Consumer, seq uint64) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if info.AckFloor.Stream >= seq {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("ack floor %d, want %d", info.AckFloor.Stream, seq)
		}
		time.Sleep(200 * time.Microsecond)
	}
}
