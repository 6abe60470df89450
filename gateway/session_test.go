package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/wire"
)

// fakeTransport records frames; Send fails with queueFull once full is set.
// With stall set, SendShared waits until stall is closed.
type fakeTransport struct {
	stall     chan struct{}
	mu        sync.Mutex
	frames    []wire.Frame
	full      bool
	closeCode int
	aborted   bool
}

func (f *fakeTransport) Send(buf *[]byte) sendResult {
	defer putBuf(buf)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closeCode != 0 {
		return sendClosing
	}
	if f.full {
		return queueFull
	}
	var fr wire.Frame
	if err := json.Unmarshal(*buf, &fr); err != nil {
		fr = wire.Frame{Op: "UNPARSEABLE", Msg: string(*buf)}
	}
	f.frames = append(f.frames, fr)
	return sent
}

func (f *fakeTransport) SendShared(b []byte) sendResult {
	if f.stall != nil {
		<-f.stall
	}
	buf := getBuf()
	*buf = append((*buf)[:0], b...)
	return f.Send(buf)
}

func (f *fakeTransport) SendBacklog(b []byte) sendResult { return f.SendShared(b) }

func (f *fakeTransport) Close(code int, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closeCode == 0 {
		f.closeCode = code
	}
}

func (f *fakeTransport) Abort(code int, reason string) {
	f.mu.Lock()
	f.aborted = true
	f.mu.Unlock()
	f.Close(code, reason)
}

func (f *fakeTransport) SendNumbered(buf *[]byte) (sendResult, uint64) {
	r := f.Send(buf)
	f.mu.Lock()
	defer f.mu.Unlock()
	return r, uint64(len(f.frames))
}

// SetBatch: a fake keeps frames apart.
func (f *fakeTransport) SetBatch(bool) {}

// Written: a fake writes every frame as it is sent.
func (f *fakeTransport) Written() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return uint64(len(f.frames))
}

func (f *fakeTransport) Expire(final *[]byte, code int, reason string) {
	f.Send(final)
	f.Abort(code, reason)
}

func (f *fakeTransport) snapshot() ([]wire.Frame, int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]wire.Frame(nil), f.frames...), f.closeCode, f.aborted
}

func newTestSession(t *testing.T, bus facade.Bus, cfg Config) (*session, *fakeTransport) {
	t.Helper()
	g, err := New(bus, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ft := &fakeTransport{}
	s := newSession(g, ft, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { s.end("test over") })
	return s, ft
}

func (s *session) handleFrame(t *testing.T, f wire.Frame) {
	t.Helper()
	b, err := wire.Encode(&f)
	if err != nil {
		t.Fatal(err)
	}
	s.handle(b)
}

// A client whose queue is full is disconnected as slow (4001), and the
// events leased to it are handed back to the group, not lost.
func testSlowClient(t *testing.T) {
	bus := newBus(t)
	s, ft := newTestSession(t, bus, Config{})
	s.handleFrame(t, wire.Frame{Op: wire.OpAuth})
	s.handleFrame(t, wire.Frame{Op: wire.OpSubscribe, Corr: "s", Topic: "slow.t", Group: "g"})
	a := publish(t, bus, "slow.t", `"a"`)
	testutil.CheckFor(t, 5*time.Second, func() error {
		frames, _, _ := ft.snapshot()
		for _, f := range frames {
			if f.Op == wire.OpEvent && f.Event.ID == a.ID {
				return nil
			}
		}
		return fmt.Errorf("no EVENT in %+v", frames)
	})
	ft.mu.Lock()
	ft.full = true
	ft.mu.Unlock()
	b := publish(t, bus, "slow.t", `"b"`)
	testutil.CheckFor(t, 5*time.Second, func() error {
		if _, code, aborted := ft.snapshot(); code != wire.CloseSlowClient || !aborted {
			return fmt.Errorf("close %d aborted %v", code, aborted)
		}
		return nil
	})
	s.mu.Lock()
	leased := s.leasesLocked()
	s.mu.Unlock()
	if leased != 2 {
		t.Fatalf("%d leases, want 2 (the unsent event stays leased until handed back)", leased)
	}
	// The connection's reader stops; teardown hands both events back.
	got := make(chan *facade.EventRecord, 4)
	unsub, err := bus.Subscribe(context.Background(), "slow.t", "g", func(_ context.Context, d facade.Delivery) error {
		e := d.Event()
		if d.Attempt() != 2 {
			return fmt.Errorf("attempt %d", d.Attempt())
		}
		got <- e
		return nil
	}, facade.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub.Stop(context.Background())
	s.end("slow")
	want := map[string]bool{a.ID: true, b.ID: true}
	for range 2 {
		select {
		case e := <-got:
			delete(want, e.ID)
		case <-time.After(5 * time.Second):
			t.Fatalf("not redelivered: %v", want)
		}
	}
	if len(want) != 0 {
		t.Fatalf("missing %v", want)
	}
}

// Only expired leases are handed back, and a stale ACK is refused.
func TestSessionLeaseSweep(t *testing.T) {
	bus := newBus(t)
	s, ft := newTestSession(t, bus, Config{})
	s.handleFrame(t, wire.Frame{Op: wire.OpAuth})
	s.handleFrame(t, wire.Frame{Op: wire.OpSubscribe, Topic: "sweep.t", Group: "short", Opts: json.RawMessage(`{"ackTimeoutMs":300}`)})
	s.handleFrame(t, wire.Frame{Op: wire.OpSubscribe, Topic: "sweep.t", Group: "long", Opts: json.RawMessage(`{"ackTimeoutMs":60000}`)})
	rec := publish(t, bus, "sweep.t", `1`)
	testutil.CheckFor(t, 5*time.Second, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.leasesLocked() != 2 {
			return fmt.Errorf("%d leases", s.leasesLocked())
		}
		return nil
	})
	// The short lease expires and comes back as attempt 2; the long one
	// stays.
	testutil.CheckFor(t, 5*time.Second, func() error {
		frames, _, _ := ft.snapshot()
		for _, f := range frames {
			if f.Op == wire.OpEvent && f.Group == "short" && f.Ctx.Attempt == 2 {
				return nil
			}
		}
		return fmt.Errorf("no redelivery")
	})
	s.mu.Lock()
	long := s.subs[subKey{"sweep.t", "long"}].leases[rec.ID]
	s.mu.Unlock()
	if long == nil || long.d.Attempt() != 1 {
		t.Fatalf("long lease %+v", long)
	}
	s.handleFrame(t, wire.Frame{Op: wire.OpAck, Corr: "stale", Topic: "sweep.t", Group: "short", ID: rec.ID, Attempt: 1})
	s.handleFrame(t, wire.Frame{Op: wire.OpAck, Corr: "cur", Topic: "sweep.t", Group: "short", ID: rec.ID, Attempt: 2})
	s.handleFrame(t, wire.Frame{Op: wire.OpAck, Corr: "long", Topic: "sweep.t", Group: "long", ID: rec.ID})
	frames, _, _ := ft.snapshot()
	answers := map[string]wire.Frame{}
	for _, f := range frames {
		if f.Corr != "" {
			answers[f.Corr] = f
		}
	}
	if answers["stale"].Code != wire.CodeUnknownID || answers["cur"].Op != wire.OpOK || answers["long"].Op != wire.OpOK {
		t.Fatalf("answers %+v", answers)
	}
}
