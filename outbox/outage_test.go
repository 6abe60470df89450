package outbox_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/outbox"
)

// natsServer is a NATS server with JetStream on a fixed port and store
// directory, so that it can be stopped and started again.
type natsServer struct {
	t    testing.TB
	dir  string
	port int
	srv  *server.Server
}

func startNATS(t testing.TB) *natsServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	n := &natsServer{t: t, dir: t.TempDir(), port: port}
	n.start()
	t.Cleanup(n.stop)
	return n
}

func (n *natsServer) start() {
	n.t.Helper()
	srv, err := jetstream.StartServer(jetstream.ServerConfig{DataDir: n.dir, Port: n.port})
	if err != nil {
		n.t.Fatal(err)
	}
	n.srv = srv
}

func (n *natsServer) stop() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.srv = nil
	}
}

func (n *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// NATS goes away for several seconds: the records written meanwhile wait
// (none is marked sent, none is parked, however many times the drainer finds
// NATS down), and all are delivered exactly once after it comes back on the
// same store.
func TestNATSOutage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend, dsn string) {
		ctx := t.Context()
		ns := startNATS(t)
		bus, err := jetstream.Open(ctx, jetstream.OpenConfig{
			URL:         ns.url(),
			NATSOptions: []nats.Option{nats.ReconnectWait(50 * time.Millisecond), nats.ReconnectJitter(0, 0)},
			Bus:         jetstream.Config{RequestTimeout: time.Second},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bus.Close() })
		s := openStore(t, dsn)
		cfg := fastConfig(t, "w")
		cfg.MaxAttempts = 3
		cfg.Timeout = 500 * time.Millisecond
		cfg.BackoffBase = 50 * time.Millisecond
		cfg.BackoffMax = 300 * time.Millisecond
		d := newDrainer(t, s, bus, cfg)
		runDrainer(t, d)

		before := addN(t, s, "outage.test", 20)
		waitSent(t, s, 20*time.Second, len(before))

		ns.stop()
		outageStart := time.Now()
		during := addN(t, s, "outage.test", 100)
		d.Notify()
		// Keep NATS down until the drainer has found it unavailable for
		// every waiting record more often than MaxAttempts allows.
		deferredBefore := d.Stats().Deferred
		testutil.CheckFor(t, 60*time.Second, func() error {
			if got := d.Stats().Deferred - deferredBefore; got < uint64(len(during)*(cfg.MaxAttempts+3)) {
				return fmt.Errorf("%d records deferred", got)
			}
			return nil
		})
		if n := countStatus(t, s, outbox.StatusSent); n != len(before) {
			t.Fatalf("%d records marked sent while NATS was down, want %d", n, len(before))
		}
		if n := countStatus(t, s, outbox.StatusError); n != 0 {
			t.Fatalf("%d records parked during the outage", n)
		}
		t.Logf("NATS down for %v; drainer stats %+v", time.Since(outageStart), d.Stats())

		if e, err := s.Get(ctx, during[0]); err == nil {
			t.Logf("during the outage: %s attempts %d last_err %q", e.Status, e.Attempts, e.LastErr)
		}
		ns.start()
		waitSent(t, s, 60*time.Second, len(before)+len(during))
		if st := d.Stats(); st.Errored != 0 || st.Retried != 0 {
			t.Fatalf("stats %+v", st)
		}
		checkStreamExactlyOnce(t, bus, "outage.test", append(before, during...))
	})
}
