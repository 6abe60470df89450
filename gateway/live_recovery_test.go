package gateway

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/wire"
)

// lagBus delays its follower's events until gate is closed: a follower
// that lags behind the stream (load, a NATS reconnect, another hub).
type lagBus struct {
	*jetstream.Bus
	gate chan struct{}
}

func (b *lagBus) Follow(ctx context.Context, topic string, after uint64, fn func(*facade.EventRecord)) (facade.Subscription, error) {
	return b.Bus.Follow(ctx, topic, after, func(e *facade.EventRecord) { <-b.gate; fn(e) })
}

// TestLiveSinceWithALaggingFollower: a subscriber with since never gets
// events at or before its since, even from a follower that lags behind.
func TestLiveSinceWithALaggingFollower(t *testing.T) {
	bus := &lagBus{Bus: newBus(t), gate: make(chan struct{})}
	g := newGateway(t, bus, Config{})
	a := dialAuth(t, g.url, "")
	a.ok(liveFrame("lag.t", "")) // starts the topic's follower
	var sent []*facade.EventRecord
	for i := range 3 {
		sent = append(sent, publish(t, bus, "lag.t", fmt.Sprint(i)))
	}
	// b knows sent[2] (from its PUBLISH OK, or from another hub) and follows after it.
	b := dialAuth(t, g.url, "")
	ok := b.ok(liveFrame("lag.t", fmt.Sprintf(`{"since":{"seq":%d}}`, sent[2].Seq)))
	t.Logf("OK %+v recovered=%v", ok, *ok.Recovered)
	close(bus.gate)
	a.liveEvents(3)
	if f, got := b.event(500 * time.Millisecond); got {
		t.Fatalf("since %d: got EVENT seq %d (a duplicate, at or before since)", sent[2].Seq, f.Event.Seq)
	}
}

// TestSSEResumeLargerThanTheQueue: an SSE resume (Last-Event-ID) with more
// missed events than OutboundQueue gets them all.
func TestSSEResumeLargerThanTheQueue(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{OutboundQueue: 16})
	for i := range 40 {
		publish(t, bus, "sseq.t", fmt.Sprint(i))
	}
	s, code := openSSE(t, g.http+"/sse/sseq.t", http.Header{"Last-Event-Id": {"0"}})
	if code != http.StatusOK {
		buf := make([]byte, 512)
		n, _ := s.resp.Body.Read(buf)
		t.Fatalf("resume of 40 events with OutboundQueue 16: status %d %s", code, buf[:n])
	}
	for i := range 40 {
		if ev := s.next(); ev.event != "event" {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
}

// TestLiveRecoveryLargerThanTheQueue: the same over WebSocket: a recovery
// may queue up to LiveRecoveryLimit events beyond OutboundQueue.
func TestLiveRecoveryLargerThanTheQueue(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{OutboundQueue: 64})
	for i := range 3000 {
		publish(t, bus, "wsq.t", fmt.Sprint(i))
	}
	c := dialAuth(t, g.url, "")
	r := c.request(liveFrame("wsq.t", `{"since":{"seq":0}}`))
	if r.Op != wire.OpOK {
		t.Fatalf("recovery of 3000 events, OutboundQueue 64: %s %s %s (closed: %v)", r.Op, r.Code, r.Msg, c.closeErr())
	}
	c.liveEvents(3000)
}

// TestLiveSinceBeyondTheStreamEnd: a since beyond the stream's end (the stream was recreated, a memory-storage
// hub restarted, a position from another deployment) is not a complete
// recovery, and live events must still arrive.
func TestLiveSinceBeyondTheStreamEnd(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	publish(t, bus, "end.t", `1`)
	c := dialAuth(t, g.url, "")
	ok := c.ok(liveFrame("end.t", `{"since":{"seq":1000}}`))
	live := publish(t, bus, "end.t", `2`)
	f, got := c.event(2 * time.Second)
	t.Logf("OK recovered=%v seq=%d first=%d; live event: %v seq %d", *ok.Recovered, ok.Seq, ok.First, got, func() uint64 {
		if f.Event == nil {
			return 0
		}
		return f.Event.Seq
	}())
	if *ok.Recovered || !got || f.Event.Seq != live.Seq {
		t.Fatalf("since 1000 on a stream ending at %d: recovered true, seq %d", live.Seq-1, ok.Seq)
	}
}

// TestLiveRecoveryLeavesNoConsumers: a recovery (ReadAfter) deletes the
// server consumer it read with.
func TestLiveRecoveryLeavesNoConsumers(t *testing.T) {
	bus := newBus(t)
	for i := range 1200 {
		publish(t, bus, "rc.t", fmt.Sprint(i))
	}
	ctx := t.Context()
	for range 5 {
		if _, err := bus.ReadAfter(ctx, "rc.t", 0, 2000, func(*facade.EventRecord) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if n := consumersOn(t, bus, "rc.t"); n != 0 {
		t.Fatalf("%d consumers left on the stream after 5 finished recoveries", n)
	}
}

// TestFollowerStopLeavesNoConsumer: a stopped follower deletes its server
// consumer (the gateway starts and stops one each time a topic gains its
// first live subscriber or loses its last).
func TestFollowerStopLeavesNoConsumer(t *testing.T) {
	bus := newBus(t)
	publish(t, bus, "fs.t", "1")
	ctx := t.Context()
	for range 3 {
		s, err := bus.Follow(ctx, "fs.t", facade.AfterNow, func(*facade.EventRecord) {})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := consumersOn(t, bus, "fs.t"); n != 0 {
		t.Fatalf("%d consumers left after 3 stopped followers", n)
	}
}

// consumersOn is how many consumers the stream of topic has.
func consumersOn(t *testing.T, bus *jetstream.Bus, topic string) int {
	t.Helper()
	ti, err := bus.LookupTopic(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ti.Stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Consumers
}

// TestSSEResumeWithTheDefaults: an SSE resume that missed more events than
// the default queue holds is answered 200 with every event.
func TestSSEResumeWithTheDefaults(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	ctx := t.Context()
	for i := range 1100 {
		if _, err := bus.Publish(ctx, "ssed.t", []byte(fmt.Sprint(i)), facade.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s, code := openSSE(t, g.http+"/sse/ssed.t", http.Header{"Last-Event-Id": {"1"}})
	if code != http.StatusOK {
		buf := make([]byte, 512)
		n, _ := s.resp.Body.Read(buf)
		t.Fatalf("resume of 1099 events, default config: status %d %s", code, buf[:n])
	}
}
