package facadetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
)

// waitTimeout bounds every wait of the suite.
const waitTimeout = 15 * time.Second

// names derives a topic and a group unique to the test.
func names(t testing.TB) (topic, group string) {
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := b.String()
	if len(s) > 60 {
		s = s[len(s)-60:]
	}
	s = strings.Trim(s, "-")
	return "conf." + s, "g-" + s
}

// received is one delivery seen by a collector.
type received struct {
	e  *facade.EventRecord
	d  facade.Delivery
	at time.Time // when the handler was called
}

// collector gathers deliveries; its handler returns what fail says.
type collector struct {
	ch   chan received
	mu   sync.Mutex
	fail func(e *facade.EventRecord, d facade.Delivery) error
}

func newCollector() *collector { return &collector{ch: make(chan received, 10_000)} }

func (c *collector) handle(_ context.Context, d facade.Delivery) error {
	e := d.Event()
	c.mu.Lock()
	f := c.fail
	c.mu.Unlock()
	at := time.Now()
	var err error
	if f != nil {
		err = f(e, d)
	}
	c.ch <- received{e, d, at}
	return err
}

// next waits for the next delivery.
func (c *collector) next(t testing.TB) received {
	t.Helper()
	return c.nextWithin(t, waitTimeout)
}

// nextWithin is next, waiting at most d.
func (c *collector) nextWithin(t testing.TB, d time.Duration) received {
	t.Helper()
	select {
	case r := <-c.ch:
		return r
	case <-time.After(d):
		t.Fatal("no delivery within", d)
		return received{}
	}
}

// take waits for n deliveries.
func (c *collector) take(t testing.TB, n int) []received {
	t.Helper()
	out := make([]received, 0, n)
	for range n {
		out = append(out, c.next(t))
	}
	return out
}

// quiet asserts that nothing is delivered for d: the bounded wait a
// negative assertion needs.
func (c *collector) quiet(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case r := <-c.ch:
		t.Fatalf("unexpected delivery of %s (seq %d, attempt %d)", r.e.Payload, r.e.Seq, r.d.Attempt())
	case <-time.After(d):
	}
}

func subscribe(t testing.TB, b facade.Bus, topic, group string, h facade.Handler, o facade.SubscribeOptions) facade.Subscription {
	t.Helper()
	sub, err := b.Subscribe(t.Context(), topic, group, h, o)
	if err != nil {
		t.Fatalf("subscribe %s/%s: %v", topic, group, err)
	}
	t.Cleanup(func() { _ = sub.Stop(context.Background()) })
	return sub
}

func publish(t testing.TB, b facade.Publisher, topic string, payload string, o facade.PublishOptions) *facade.EventRecord {
	t.Helper()
	e, err := b.Publish(t.Context(), topic, json.RawMessage(payload), o)
	if err != nil {
		t.Fatalf("publish %s %s: %v", topic, payload, err)
	}
	return e
}

// publishN publishes {"n":0} … {"n":n-1}.
func publishN(t testing.TB, b facade.Publisher, topic string, n int) []*facade.EventRecord {
	t.Helper()
	out := make([]*facade.EventRecord, n)
	for i := range n {
		out[i] = publish(t, b, topic, fmt.Sprintf(`{"n":%d}`, i), facade.PublishOptions{})
	}
	return out
}

// num returns the n of a {"n":…} payload.
func num(t testing.TB, e *facade.EventRecord) int {
	t.Helper()
	var v struct{ N int }
	if err := json.Unmarshal(e.Payload, &v); err != nil {
		t.Fatalf("payload %s: %v", e.Payload, err)
	}
	return v.N
}

// nums returns the sorted n of each delivery's {"n":…} payload.
func nums(t testing.TB, rs []received) []int {
	t.Helper()
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = num(t, r.e)
	}
	slices.Sort(out)
	return out
}

// seq returns [from, to).
func seq(from, to int) []int {
	out := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}
