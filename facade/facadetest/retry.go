package facadetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
)

// attemptTimes subscribes a handler that nacks every delivery of the one
// event published, and returns when each of its attempts began.
func attemptTimes(t *testing.T, b facade.Bus, topic, group string, o facade.SubscribeOptions) []time.Time {
	t.Helper()
	type attempt struct {
		n  int
		at time.Time
	}
	ch := make(chan attempt, 100)
	subscribe(t, b, topic, group, func(_ context.Context, d facade.Delivery) error {
		ch <- attempt{d.Attempt(), time.Now()}
		return errors.New("not yet")
	}, o)
	publish(t, b, topic, `{"n":0}`, facade.PublishOptions{})
	var out []time.Time
	for len(out) < o.MaxAttempts {
		select {
		case a := <-ch:
			if a.n != len(out)+1 {
				t.Fatalf("attempt %d after %d attempts", a.n, len(out))
			}
			out = append(out, a.at)
		case <-time.After(waitTimeout):
			t.Fatalf("attempt %d did not come within %v", len(out)+1, waitTimeout)
		}
	}
	return out
}

// checkGaps fails unless the time between attempts i and i+1 is at least
// least[i].
func checkGaps(t *testing.T, times []time.Time, least []time.Duration) {
	t.Helper()
	for i, want := range least {
		if got := times[i+1].Sub(times[i]); got < want {
			t.Errorf("attempt %d came %v after attempt %d, want at least %v", i+2, got, i+1, want)
		}
	}
}

// testRetryList: an explicit list of waits, its last entry repeating.
// (The default policy would wait 100, 200 and 400 ms.)
func testRetryList(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	times := attemptTimes(t, b, topic, group, facade.SubscribeOptions{
		MaxAttempts: 4, Retry: &facade.RetryPolicy{BackoffMs: []int64{300, 900}},
	})
	checkGaps(t, times, []time.Duration{300 * time.Millisecond, 900 * time.Millisecond, 900 * time.Millisecond})
}

// testRetryExponential: the minimum doubles per attempt up to the maximum.
func testRetryExponential(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	times := attemptTimes(t, b, topic, group, facade.SubscribeOptions{
		MaxAttempts: 4, Retry: &facade.RetryPolicy{MinBackoffMs: 250, MaxBackoffMs: 600},
	})
	checkGaps(t, times, []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, 600 * time.Millisecond})
}

// testRetryIsTheGroups: the member that creates a group sets its retry
// policy; members on other hubs (buses) that ask for another are refused
// with ErrConflictingOption, members that ask for none follow it.
func testRetryIsTheGroups(t *testing.T, env Env) {
	topic, group := names(t)
	nop := func(context.Context, facade.Delivery) error { return nil }
	policy := &facade.RetryPolicy{BackoffMs: []int64{700}}
	first, other, follower := env.NewBus(t), env.NewBus(t), env.NewBus(t)
	creator, err := first.Subscribe(t.Context(), topic, group, nop, facade.SubscribeOptions{Retry: policy})
	if err != nil {
		t.Fatal(err)
	}
	defer creator.Stop(context.Background())
	for _, p := range []*facade.RetryPolicy{{MinBackoffMs: 50}, {BackoffMs: []int64{700, 800}}, {MinBackoffMs: 700, MaxBackoffMs: 700}} {
		if sub, err := other.Subscribe(t.Context(), topic, group, nop, facade.SubscribeOptions{Retry: p}); !errors.Is(err, facade.ErrConflictingOption) {
			if sub != nil {
				_ = sub.Stop(context.Background())
			}
			t.Fatalf("retry %+v on a group created with %+v: %v, want ErrConflictingOption", p, policy, err)
		}
	}
	same, err := other.Subscribe(t.Context(), topic, group, nop, facade.SubscribeOptions{Retry: &facade.RetryPolicy{BackoffMs: []int64{700}}})
	if err != nil {
		t.Fatalf("the group's own policy: %v", err)
	}
	if err := same.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := creator.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A member that sets none retries with the group's policy.
	times := attemptTimes(t, follower, topic, group, facade.SubscribeOptions{MaxAttempts: 2})
	checkGaps(t, times, []time.Duration{700 * time.Millisecond})

	// A group created without a policy has the bus's default: asking for
	// another one is refused too.
	plain := group + "-default"
	subscribe(t, first, topic, plain, nop, facade.SubscribeOptions{})
	if sub, err := other.Subscribe(t.Context(), topic, plain, nop, facade.SubscribeOptions{Retry: &facade.RetryPolicy{MinBackoffMs: 5000}}); !errors.Is(err, facade.ErrConflictingOption) {
		if sub != nil {
			_ = sub.Stop(context.Background())
		}
		t.Fatalf("retry on a group created without one: %v, want ErrConflictingOption", err)
	}
}

// testRetryExpiredLease: a lease the hub ends itself (the member's ack
// timeout is shorter than the group's ack wait) is handed back after the
// retry delay, as a nack is.
func testRetryExpiredLease(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	nop := func(context.Context, facade.Delivery) error { return nil }
	// The group's ack wait is a minute, its retry delay 800 ms.
	first, err := b.Subscribe(t.Context(), topic, group, nop, facade.SubscribeOptions{
		AckTimeoutMs: 60_000, Retry: &facade.RetryPolicy{BackoffMs: []int64{800}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{ManualAck: true, AckTimeoutMs: 300})
	publish(t, b, topic, `{"n":0}`, facade.PublishOptions{})
	r1 := c.next(t) // left to expire
	r2 := c.next(t)
	if r2.d.Attempt() != 2 || r2.e.ID != r1.e.ID {
		t.Fatalf("after the lease expired: %s attempt %d", r2.e.ID, r2.d.Attempt())
	}
	// Measured between the handler calls, not when this goroutine got to
	// see them, which a loaded machine delays.
	if got, least := r2.at.Sub(r1.at), 300*time.Millisecond+800*time.Millisecond; got < least-50*time.Millisecond {
		t.Fatalf("redelivered %v after the first delivery, want the lease (300 ms) and the retry delay (800 ms)", got)
	}
	if err := r2.d.Ack(t.Context()); err != nil {
		t.Fatal(err)
	}
}
