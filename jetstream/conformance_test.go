package jetstream_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/facade/facadetest"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/jetstream"
)

// familyConfig declares the topic family of the wildcard cases and the
// topics of the key expiry case.
func familyConfig() jetstream.Config {
	return jetstream.Config{Topics: []jetstream.TopicConfig{
		{Pattern: "fam.**", Stream: "CONF_FAMILY"},
		{Pattern: "expiring.**", DeleteMarkerTTL: time.Second},
	}}
}

// TestConformanceEmbedded runs the facade suite against buses on an embedded
// nats-server reached in-process, as the hub runs by default.
func TestConformanceEmbedded(t *testing.T) {
	outer, dir := t, t.TempDir()
	var mu sync.Mutex
	srv := natstest.RunEmbeddedIn(t, dir, 0)
	current := func() *server.Server { mu.Lock(); defer mu.Unlock(); return srv }
	facadetest.Run(t, facadetest.Env{
		NewBus: func(t testing.TB) facade.Bus {
			b, err := jetstream.New(natstest.InProcessConn(t, current()), familyConfig())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
		Restart: func(testing.TB) {
			mu.Lock()
			defer mu.Unlock()
			srv.Shutdown()
			srv.WaitForShutdown()
			srv = natstest.RunEmbeddedIn(outer, dir, 0) // owned by the whole test
		},
		Native:   func(t testing.TB) facadetest.Native { return natstest.Native(t, current().ClientURL()) },
		Family:   "fam",
		Expiring: "expiring",
	})
}

// TestConformanceExternal runs the suite against a separate nats-server
// process, each bus with its own TCP connection as separate hubs would have.
func TestConformanceExternal(t *testing.T) {
	p := natstest.StartProcess(t)
	facadetest.Run(t, facadetest.Env{
		NewBus: func(t testing.TB) facade.Bus {
			b, err := jetstream.Open(context.Background(), jetstream.OpenConfig{URL: p.URL(), Bus: familyConfig()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
		Restart:  func(t testing.TB) { p.Restart() },
		Native:   func(t testing.TB) facadetest.Native { return natstest.Native(t, p.URL()) },
		Family:   "fam",
		Expiring: "expiring",
	})
}
