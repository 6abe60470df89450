package facadetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
)

// keyed publishes {"n":n} with key for each "key:n" of evs, in order.
func keyed(t *testing.T, b facade.Publisher, topic string, evs ...string) {
	t.Helper()
	for _, ev := range evs {
		var key string
		var n int
		if _, err := fmt.Sscanf(ev, "%1s:%d", &key, &n); err != nil {
			t.Fatalf("event %q: %v", ev, err)
		}
		publish(t, b, topic, fmt.Sprintf(`{"n":%d}`, n), facade.PublishOptions{Key: key})
	}
}

// label is a delivery as "key:n/attempt".
func label(t testing.TB, r received) string {
	return fmt.Sprintf("%s:%d/%d", r.e.Key, num(t, r.e), r.d.Attempt())
}

// ofKey keeps the labels of key.
func ofKey(labels []string, key string) []string {
	var out []string
	for _, l := range labels {
		if l[:len(key)+1] == key+":" {
			out = append(out, l)
		}
	}
	return out
}

// testOrderByKey: the events of one key reach one handler at a time, in
// stream order, while the events of different keys run in parallel.
func testOrderByKey(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	keys := []string{"a", "b", "c", "d"}
	const perKey = 5
	for n := range perKey {
		for _, k := range keys {
			keyed(t, b, topic, fmt.Sprintf("%s:%d", k, n))
		}
	}
	var (
		mu       sync.Mutex
		running  = map[string]bool{}
		next     = map[string]int{}
		peak     int
		problems []string
		handled  int
		parallel = make(chan struct{})
	)
	h := func(ctx context.Context, d facade.Delivery) error {
		e := d.Event()
		n := num(t, e)
		mu.Lock()
		if running[e.Key] {
			problems = append(problems, fmt.Sprintf("%s:%d started while another event of its key ran", e.Key, n))
		}
		if n != next[e.Key] {
			problems = append(problems, fmt.Sprintf("%s:%d came when %s:%d was next", e.Key, n, e.Key, next[e.Key]))
		}
		running[e.Key] = true
		if len(running) > peak {
			peak = len(running)
			if peak == 2 {
				close(parallel)
			}
		}
		mu.Unlock()
		// Hold the first handlers until two keys run at once (or a while
		// passed, which the peak check then reports).
		select {
		case <-parallel:
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
		}
		mu.Lock()
		delete(running, e.Key)
		next[e.Key] = n + 1
		handled++
		mu.Unlock()
		return nil
	}
	subscribe(t, b, topic, group, h, facade.SubscribeOptions{From: facade.FromEarliest, MaxInFlight: 4, OrderBy: facade.OrderByKey})
	testutil.CheckFor(t, waitTimeout, func() error {
		mu.Lock()
		defer mu.Unlock()
		if handled != len(keys)*perKey {
			return fmt.Errorf("%d of %d handled", handled, len(keys)*perKey)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("order by key broken: %v", problems)
	}
	if peak < 2 {
		t.Fatalf("at most %d keys in flight at once, want parallel keys", peak)
	}
}

// testOrderByKeyNackHolds: a nacked event holds its key's later events
// back until it is settled, here dead-lettered; other keys go on.
func testOrderByKeyNackHolds(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	c := newCollector()
	c.fail = func(e *facade.EventRecord, _ facade.Delivery) error {
		if e.Key == "a" && num(t, e) == 0 {
			return errors.New("not now")
		}
		return nil
	}
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{
		MaxAttempts: 2, OrderBy: facade.OrderByKey, Retry: &facade.RetryPolicy{BackoffMs: []int64{600}},
	})
	keyed(t, b, topic, "a:0", "a:1", "b:0", "a:2", "b:1")
	var got []string
	for _, r := range c.take(t, 6) {
		got = append(got, label(t, r))
	}
	if a := ofKey(got, "a"); !slices.Equal(a, []string{"a:0/1", "a:0/2", "a:1/1", "a:2/1"}) {
		t.Fatalf("key a delivered %v, want its first event twice (nacked, then dead-lettered) before the others", a)
	}
	if bs := ofKey(got, "b"); !slices.Equal(bs, []string{"b:0/1", "b:1/1"}) {
		t.Fatalf("key b delivered %v", bs)
	}
	if slices.Index(got, "b:1/1") > slices.Index(got, "a:0/2") {
		t.Fatalf("deliveries %v: key b waited for key a's retry", got)
	}
}

// testOrderByKeyExpiryHolds: an expired lease holds the key's later events
// back until the redelivered event is settled.
func testOrderByKeyExpiryHolds(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{
		ManualAck: true, AckTimeoutMs: 1000, OrderBy: facade.OrderByKey, Retry: &facade.RetryPolicy{BackoffMs: []int64{100}},
	})
	keyed(t, b, topic, "a:0", "a:1", "b:0")
	ack := func(r received) {
		t.Helper()
		if err := r.d.Ack(t.Context()); err != nil {
			t.Fatalf("ack %s: %v", label(t, r), err)
		}
	}
	// Every b is acknowledged; the first a:0 is left to expire; a:1 must
	// not come until a redelivery of a:0 is acknowledged.
	next := func() received {
		t.Helper()
		for {
			r := c.next(t)
			if r.e.Key != "b" {
				return r
			}
			ack(r)
		}
	}
	first := next()
	if num(t, first.e) != 0 {
		t.Fatalf("first delivery of key a: %s", label(t, first))
	}
	again := next()
	if num(t, again.e) != 0 || again.d.Attempt() <= first.d.Attempt() {
		t.Fatalf("after the lease of %s expired: %s, want a:0 again (a:1 must wait)", label(t, first), label(t, again))
	}
	// a:1 waits while a:0 is out again.
	for end := time.After(300 * time.Millisecond); ; {
		select {
		case r := <-c.ch:
			if r.e.Key == "a" {
				t.Fatalf("%s delivered while %s was held", label(t, r), label(t, again))
			}
			ack(r)
			continue
		case <-end:
		}
		break
	}
	ack(again)
	if r := next(); label(t, r) != "a:1/1" {
		t.Fatalf("after a:0 settled: %s, want a:1/1", label(t, r))
	} else {
		ack(r)
	}
}

// testOrderByKeyMemberCrash: a member that ends with a key's event held
// (its hub or connection closes) leaves the key blocked until the event
// is redelivered to another member and settled; the key's later events
// never reach another member meanwhile.
func testOrderByKeyMemberCrash(t *testing.T, env Env) {
	first, second := env.NewBus(t), env.NewBus(t)
	closer, ok := first.(interface{ Close() error })
	if !ok {
		t.Skip("the bus has no Close")
	}
	topic, group := names(t)
	opts := facade.SubscribeOptions{ManualAck: true, AckTimeoutMs: 5000, OrderBy: facade.OrderByKey}
	held := newCollector()
	subscribe(t, first, topic, group, held.handle, opts)
	keyed(t, first, topic, "a:0", "a:1")
	if r := held.next(t); label(t, r) != "a:0/1" {
		t.Fatalf("first member got %s, want a:0/1", label(t, r))
	}
	c := newCollector()
	subscribe(t, second, topic, group, c.handle, opts)
	keyed(t, first, topic, "b:0")
	// The second member may take b (over WebSocket, members share the
	// hub's), never a:1 while a:0 is held.
	deadline := time.After(500 * time.Millisecond)
	for waiting := true; waiting; {
		select {
		case r := <-c.ch:
			if r.e.Key == "a" {
				t.Fatalf("second member got %s while a:0 was held", label(t, r))
			}
			_ = r.d.Ack(t.Context())
		case r := <-held.ch:
			if r.e.Key == "a" {
				t.Fatalf("first member got %s while it held a:0", label(t, r))
			}
			_ = r.d.Ack(t.Context())
		case <-deadline:
			waiting = false
		}
	}
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
	// A member that goes without unpinning the group (its connection
	// dropped, or the unpin request failed) keeps the pin for the group's
	// pin timeout (15s by default): the other member pulls only after it.
	// Taking over, that member fences the keys the old one may still hold
	// until their events come back, and for at most the group's ack wait
	// plus the pin timeout (20s) when it could not read the pending window
	// (a request timing out on a loaded machine, 5s). That is 40s before
	// a:0 may start; the wait allows twice that.
	var got []string
	for len(ofKey(got, "a")) < 2 {
		r := c.nextWithin(t, 80*time.Second)
		got = append(got, fmt.Sprintf("%s:%d", r.e.Key, num(t, r.e)))
		if r.e.Key == "a" && num(t, r.e) == 0 {
			c.quiet(t, 200*time.Millisecond) // a:1 waits for a:0
		}
		if err := r.d.Ack(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if a := ofKey(got, "a"); !slices.Equal(a, []string{"a:0", "a:1"}) {
		t.Fatalf("after the crash key a came as %v, want a:0 then a:1", a)
	}
}

// testOrderByIsTheGroups: the order is the group's: a member asking for
// none follows it, one asking for key on an unordered group is refused.
func testOrderByIsTheGroups(t *testing.T, env Env) {
	b, other, third := env.NewBus(t), env.NewBus(t), env.NewBus(t)
	topic, group := names(t)
	nop := func(context.Context, facade.Delivery) error { return nil }
	subscribe(t, b, topic, group, nop, facade.SubscribeOptions{OrderBy: facade.OrderByKey})
	subscribe(t, other, topic, group, nop, facade.SubscribeOptions{})
	subscribe(t, third, topic, group, nop, facade.SubscribeOptions{OrderBy: facade.OrderByKey})
	plain := group + "-plain"
	subscribe(t, b, topic, plain, nop, facade.SubscribeOptions{})
	for _, bus := range []facade.Bus{other, third} {
		sub, err := bus.Subscribe(t.Context(), topic, plain, nop, facade.SubscribeOptions{OrderBy: facade.OrderByKey})
		if !errors.Is(err, facade.ErrConflictingOption) {
			if sub != nil {
				_ = sub.Stop(context.Background())
			}
			t.Fatalf("orderBy key on an unordered group: %v, want ErrConflictingOption", err)
		}
	}
	var raw facade.SubscribeOptions
	if err := json.Unmarshal([]byte(`{"orderBy":"key"}`), &raw); err != nil || raw.OrderBy != facade.OrderByKey {
		t.Fatalf("opts {\"orderBy\":\"key\"}: %+v, %v", raw, err)
	}
}
