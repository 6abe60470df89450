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

func dialClient(t testing.TB, url string, cfg Config) *Client {
	t.Helper()
	c, err := Dial(context.Background(), url, cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
