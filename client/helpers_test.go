package client

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/gateway"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
)

func TestMain(m *testing.M) {
	os.Exit(testutil.RunCheckingLeaks(m, 5*time.Second, "eventhub/client.", "eventhub/gateway."))
}

func newBus(t testing.TB) *jetstream.Bus {
	t.Helper()
	b, err := jetstream.Open(context.Background(), jetstream.OpenConfig{Server: jetstream.ServerConfig{DataDir: t.TempDir(), Port: -1}})
	if err != nil {
		t.Fatalf("open bus: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// serveGateway serves a gateway over bus on ln (a new loopback listener if
// nil) and returns its ws:// URL and a stop function (also registered as
// cleanup).
func serveGateway(t testing.TB, bus facade.Bus, cfg gateway.Config, ln net.Listener) (string, func()) {
	t.Helper()
	g, err := gateway.New(bus, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ln == nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- g.Serve(ctx, ln) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	t.Cleanup(stop)
	return "ws://" + ln.Addr().String(), stop
}

// restartable is a gateway over a bus on a loopback port, which it can
// serve again after stop (a gateway restart, for reconnect tests).
type restartable struct {
	t    testing.TB
	bus  facade.Bus
	addr string
	stop func()
}

// reconnectingClient serves a restartable gateway over bus and dials a
// client to it that reconnects within 100 ms.
func reconnectingClient(t testing.TB, bus facade.Bus) (*Client, *restartable) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &restartable{t: t, bus: bus, addr: ln.Addr().String()}
	var url string
	url, g.stop = serveGateway(t, bus, gateway.Config{}, ln)
	return dialClient(t, url, Config{ReconnectMin: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond}), g
}

// restart serves the gateway again on its port, after stop.
func (g *restartable) restart() {
	g.t.Helper()
	ln, err := net.Listen("tcp", g.addr)
	if err != nil {
		g.t.Fatalf("relisten: %v", err)
	}
	_, g.stop = serveGateway(g.t, g.bus, gateway.Config{}, ln)
}

func dialClient(t testing.TB, url string, cfg Config) *Client {
	t.Helper()
	c, err := Dial(context.Background(), url, cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
