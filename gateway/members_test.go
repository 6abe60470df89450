package gateway

import (
	"fmt"
	"testing"
	"time"

	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/wire"
)

// TestSessionsShareOneMemberPerGroup: connections subscribed to one group
// share one bus member (one JetStream pull loop), the work is spread over
// them, no event reaches two of them, and the member goes when the last
// connection leaves.
func TestSessionsShareOneMemberPerGroup(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{MaxInflightPerSub: 5})
	const conns, events = 8, 200
	clients := make([]*wsClient, conns)
	for i := range clients {
		clients[i] = dialAuth(t, g.url, "")
		clients[i].ok(subscribeFrame("share.t", "g", `{"from":"earliest"}`))
	}
	members := g.members.len()
	if members != 1 {
		t.Fatalf("%d bus members for %d connections of one group, want 1", members, conns)
	}
	ti, err := bus.LookupTopic(t.Context(), "share.t")
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 5*time.Second, func() error {
		cons, err := ti.Stream.Consumer(t.Context(), "g")
		if err != nil {
			return err
		}
		if w := cons.CachedInfo().NumWaiting; w > 1 {
			return fmt.Errorf("%d pull requests waiting on the group, want at most 1", w)
		}
		return nil
	})
	for i := range events {
		publish(t, bus, "share.t", fmt.Sprintf(`{"n":%d}`, i))
	}
	seen := map[string]int{}
	per := make([]int, conns)
	deadline := time.Now().Add(15 * time.Second)
	for len(seen) < events && time.Now().Before(deadline) {
		for i, c := range clients {
			ev, ok := c.await(10*time.Millisecond, func(f wire.Frame) bool { return f.Op == wire.OpEvent })
			if !ok {
				continue
			}
			seen[ev.Event.ID]++
			per[i]++
			c.send(ackFrame(ev))
		}
	}
	if len(seen) != events {
		t.Fatalf("%d of %d events delivered", len(seen), events)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("event %s delivered %d times", id, n)
		}
	}
	busy := 0
	for _, n := range per {
		if n > 0 {
			busy++
		}
	}
	if busy < conns/2 {
		t.Fatalf("work reached %d of %d connections: %v", busy, conns, per)
	}
	for _, c := range clients {
		c.c.Close()
	}
	testutil.CheckFor(t, 5*time.Second, func() error {
		if n := g.members.len(); n != 0 {
			return fmt.Errorf("%d members left after every connection closed", n)
		}
		return nil
	})
}
