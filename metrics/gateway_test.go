package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/gateway"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/metrics"
	"github.com/eventhub/eventhub/wire"
)

// wsConn is a raw WebSocket client whose frames a reader goroutine hands
// to the test.
type wsConn struct {
	c      *websocket.Conn
	frames chan wire.Frame
	done   chan struct{}
}

func dialGateway(t *testing.T, url string) *wsConn {
	t.Helper()
	c, _, err := (&websocket.Dialer{HandshakeTimeout: 5 * time.Second}).Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &wsConn{c: c, frames: make(chan wire.Frame, 64), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			var f wire.Frame
			if err := c.ReadJSON(&f); err != nil {
				return
			}
			w.frames <- f
		}
	}()
	t.Cleanup(w.close)
	w.call(t, wire.Frame{Op: wire.OpAuth})
	return w
}

func (w *wsConn) close() {
	_ = w.c.Close()
	<-w.done
}

// call sends f and waits for its OK; EVENT frames that come first are
// returned.
func (w *wsConn) call(t *testing.T, f wire.Frame) (events []wire.Frame) {
	t.Helper()
	f.Corr = fmt.Sprint(time.Now().UnixNano())
	if err := w.c.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case got := <-w.frames:
			switch {
			case got.Op == wire.OpEvent:
				events = append(events, got)
			case got.Corr == f.Corr && got.Op == wire.OpOK:
				return events
			default:
				t.Fatalf("%s: %+v", f.Op, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer", f.Op)
		}
	}
}

// events waits for n EVENT frames.
func (w *wsConn) events(t *testing.T, n int) []wire.Frame {
	t.Helper()
	var out []wire.Frame
	for len(out) < n {
		select {
		case f := <-w.frames:
			if f.Op == wire.OpEvent {
				out = append(out, f)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d events", len(out), n)
		}
	}
	return out
}

// TestGatewayMetrics: ws_connections, ws_group_members and ws_inflight
// follow connections, group subscriptions and unacknowledged events, as an
// operator scraping /metrics reads them.
func TestGatewayMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.RunEmbedded(t)
	b, err := jetstream.New(natstest.InProcessConn(t, srv), jetstream.Config{Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	g, err := gateway.New(b, gateway.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(m.NewGatewayCollector(g)); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- g.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	url := "ws://" + ln.Addr().String()

	const topic = "gm.t"
	gLabels := map[string]string{"topic": topic, "group": "g"}
	hLabels := map[string]string{"topic": topic, "group": "h"}
	// want waits for the gauges to read as given (-1: no series).
	want := func(conns, members, inflightG, inflightH float64) {
		t.Helper()
		testutil.CheckFor(t, 10*time.Second, func() error {
			got := [4]float64{
				value(t, reg, "ws_connections", nil), value(t, reg, "ws_group_members", nil),
				value(t, reg, "ws_inflight", gLabels), value(t, reg, "ws_inflight", hLabels),
			}
			if exp := [4]float64{conns, members, inflightG, inflightH}; got != exp {
				return fmt.Errorf("ws_connections, ws_group_members, ws_inflight{g}, ws_inflight{h} = %v, want %v", got, exp)
			}
			return nil
		})
	}
	want(0, 0, -1, -1)

	a, c := dialGateway(t, url), dialGateway(t, url)
	want(2, 0, -1, -1)
	opts := json.RawMessage(`{"from":"earliest","maxInFlight":10}`)
	a.call(t, wire.Frame{Op: wire.OpSubscribe, Topic: topic, Group: "g", Opts: opts})
	want(2, 1, 0, -1)
	c.call(t, wire.Frame{Op: wire.OpSubscribe, Topic: topic, Group: "h", Opts: opts})
	want(2, 2, 0, 0) // one bus member per topic and group

	for i := range 3 {
		if _, err := b.Publish(t.Context(), topic, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), facade.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	evA, evC := a.events(t, 3), c.events(t, 3)
	want(2, 2, 3, 3)
	for i, f := range evC {
		c.call(t, wire.Frame{Op: wire.OpAck, Topic: topic, Group: "h", ID: f.Event.ID})
		want(2, 2, 3, float64(2-i))
	}
	a.call(t, wire.Frame{Op: wire.OpAck, Topic: topic, Group: "g", ID: evA[0].Event.ID})
	want(2, 2, 2, 0)

	c.close()
	want(1, 1, 2, -1) // h's only member left
	a.close()
	want(0, 0, -1, -1) // unacknowledged events handed back
}
