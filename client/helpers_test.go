package client

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/gateway"
	"github.com/eventhub/eventhub/jetstream"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := checkNoLeaks(5 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

func checkNoLeaks(grace time.Duration) error {
	deadline := time.Now().Add(grace)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if (strings.Contains(g, "eventhub/client.") || strings.Contains(g, "eventhub/gateway.")) &&
				!strings.Contains(g, "TestMain") && !strings.Contains(g, "checkNoLeaks") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("leaked goroutines:\n%s", strings.Join(leaked, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
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
