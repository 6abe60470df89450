package client

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/facade/facadetest"
	"github.com/eventhub/eventhub/gateway"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/jetstream"
)

// TestConformance runs the facade conformance suite against the WebSocket
// client: every bus is a client connected to one gateway over one
// embedded-NATS store. It runs with batched frames (the default) and
// without.
func TestConformance(t *testing.T) {
	t.Run("batched", func(t *testing.T) { conformance(t, Config{Token: "conformance"}) })
	t.Run("unbatched", func(t *testing.T) { conformance(t, Config{Token: "conformance", NoBatch: true}) })
}

func conformance(t *testing.T, cfg Config) {
	bus, err := jetstream.Open(context.Background(), jetstream.OpenConfig{
		Server: jetstream.ServerConfig{DataDir: t.TempDir(), Port: -1},
		// The topic family of the wildcard cases, the topics of the key
		// expiry case.
		Bus: jetstream.Config{Topics: []jetstream.TopicConfig{
			{Pattern: "fam.**", Stream: "CONF_FAMILY"},
			{Pattern: "expiring.**", DeleteMarkerTTL: time.Second},
		}},
	})
	if err != nil {
		t.Fatalf("open bus: %v", err)
	}
	t.Cleanup(func() { bus.Close() })
	url, _ := serveGateway(t, bus, gateway.Config{Token: "conformance"}, nil)
	facadetest.Run(t, facadetest.Env{
		NewBus: func(t testing.TB) facade.Bus {
			c, err := Dial(context.Background(), url, cfg)
			if err != nil {
				t.Fatalf("dial gateway: %v", err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		},
		// The interop cases: a plain NATS client beside the WebSocket one.
		Native: func(t testing.TB) facadetest.Native {
			nc, err := nats.Connect("", nats.InProcessServer(bus.Server()))
			if err != nil {
				t.Fatalf("nats: %v", err)
			}
			t.Cleanup(nc.Close)
			return natstest.NativeConn(t, nc)
		},
		// LatestByKey has no WebSocket op; Filter runs in the client.
		Features: facadetest.Features{NoKeys: true},
		Family:   "fam",
		Expiring: "expiring",
	})
}
