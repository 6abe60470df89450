package jetstream

import (
	"context"
	"errors"
	"fmt"
	"golang.org/x/sync/singleflight"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventhub/eventhub/facade"
)

var (
	_ facade.Bus            = (*Bus)(nil)
	_ facade.AsyncPublisher = (*Bus)(nil)
	_ facade.KeyReader      = (*Bus)(nil)
)

// Bus is the event bus on NATS JetStream. It is safe for concurrent use.
//
// A Bus made by [New] borrows its connection and never closes it; one made by
// [Open] owns its connection and, for the embedded mode, its nats-server, and
// closes both on [Bus.Close].
type Bus struct {
	cfg Config
	log *slog.Logger
	nc  *nats.Conn
	js  jetstream.JetStream
	// tracer makes the spans of publishes and deliveries; nil: no tracing.
	tracer trace.Tracer
	// stallWait makes PublishAsync wait for room in the window for the
	// rest of RequestTimeout after nats.go's own 200 ms (nil: no longer);
	// see sendAsync.
	stallWait jetstream.PublishOpt
	// tsHeader is the header of the latest millisecond's plain publishes
	// (see timeHeader).
	tsHeader atomic.Pointer[tsHeader]

	// owned resources, nil when borrowed
	ownConn bool
	srv     *server.Server
	dirLock *os.File // the embedded server's data directory, held until it stops
	tempDir string

	// topicFlight makes one lookup (and creation) per topic at a time:
	// concurrent first publishes of a new topic create its stream once,
	// and count once against the creator's topic quota.
	topicFlight singleflight.Group
	topicsMu    sync.Mutex
	topics      map[string]*topicInfo

	subsMu sync.RWMutex
	subs   map[*subscription]struct{}
	closed bool
	done   chan struct{} // closed when the bus starts closing

	expiry expiryHeap // deadlines of ManualAck deliveries

	released released // deliveries that reached no one, not counted as attempts

	wg sync.WaitGroup // subscriptions' goroutines and dead-letter copies

	// deadLetters holds a slot per dead-letter copy in flight
	// (maxDeadLettersInFlight); copying cancels the copies still running
	// when Shutdown's ctx ends.
	deadLetters   chan struct{}
	copying       context.Context
	cancelCopying context.CancelFunc

	// terminations receives JetStream's advisories of terminated events
	// (see watchTerminations).
	terminations *nats.Subscription

	// catalogue, while one is watched, learns of the streams and groups
	// the bus makes as it makes them.
	catalogue atomic.Pointer[Catalogue]
}

// maxDeadLettersInFlight bounds the dead-letter copies a Bus runs at once;
// an event that finds no room is handed back and tried again later.
const maxDeadLettersInFlight = 64

// New returns a Bus on an existing connection. The Bus does not close nc.
func New(nc *nats.Conn, cfg Config) (*Bus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.Topics = natsTopics(cfg.Topics)
	if err := checkServerVersion(nc); err != nil {
		return nil, err
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = defaultReplicas(nc)
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(cfg.PublishAsyncMaxPending),
		jetstream.WithDefaultTimeout(cfg.RequestTimeout),
	)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	copying, cancelCopying := context.WithCancel(context.Background())
	b := &Bus{
		cfg:       cfg,
		log:       cfg.Logger,
		nc:        nc,
		js:        js,
		stallWait: stallWaitAfterDefault(cfg.RequestTimeout),
		topics:    make(map[string]*topicInfo),
		subs:      make(map[*subscription]struct{}),
		done:      make(chan struct{}),

		deadLetters:   make(chan struct{}, maxDeadLettersInFlight),
		copying:       copying,
		cancelCopying: cancelCopying,
	}
	if tp := cfg.TracerProvider; tp != nil {
		b.tracer = tp.Tracer(tracerName)
	}
	if b.terminations, err = b.watchTerminations(); err != nil {
		cancelCopying()
		return nil, err
	}
	return b, nil
}

// OpenConfig says where a Bus opened with [Open] finds NATS.
type OpenConfig struct {
	// URL of an external NATS server or cluster (comma-separated). Empty:
	// start an embedded server with Server.
	URL string
	// NATSOptions are applied to the bus's connection: credentials, TLS and
	// the like for an external server; the hub's own credentials for an
	// embedded server whose clients must authenticate.
	NATSOptions []nats.Option
	// Server configures the embedded server.
	Server ServerConfig
	// Bus configures the bus.
	Bus Config
}

// Open starts an embedded nats-server (or connects to OpenConfig.URL) and
// returns a Bus that owns what it started. The embedded server is reached
// in-process, without a socket.
func Open(ctx context.Context, oc OpenConfig) (*Bus, error) {
	if oc.URL != "" {
		opts := append([]nats.Option{
			nats.Name("eventhub"),
			nats.MaxReconnects(-1),
			nats.RetryOnFailedConnect(false),
			// A server that stops answering without closing the socket
			// (frozen, or cut off by the network) is left after about 15 s
			// instead of nats.go's 4 minutes, so the bus reconnects to
			// another node of a cluster while the others elect new leaders.
			nats.PingInterval(5 * time.Second),
			nats.MaxPingsOutstanding(3),
		}, append(connectionLogging(oc.Bus.Logger), oc.NATSOptions...)...)
		nc, err := nats.Connect(oc.URL, opts...)
		if err != nil {
			return nil, fmt.Errorf("%w: connect %s: %w", facade.ErrUnavailable, RedactURL(oc.URL), err)
		}
		b, err := New(nc, oc.Bus)
		if err != nil {
			nc.Close()
			return nil, err
		}
		b.ownConn = true
		if err := b.ping(ctx); err != nil {
			b.Close()
			return nil, err
		}
		return b, nil
	}
	sc := oc.Server
	if sc.Logger == nil {
		sc.Logger = oc.Bus.Logger
	}
	if err := checkEmbeddedReplicas(oc.Bus, sc); err != nil {
		return nil, err
	}
	srv, lock, err := startServer(sc)
	if err != nil {
		return nil, err
	}
	stop := func() {
		srv.Shutdown()
		srv.WaitForShutdown()
		if lock != nil {
			lock.Close()
		}
		if sc.Memory {
			os.RemoveAll(srv.StoreDir())
		}
	}
	nc, err := nats.Connect("", append([]nats.Option{nats.InProcessServer(srv), nats.Name("eventhub")}, oc.NATSOptions...)...)
	if err != nil {
		stop()
		return nil, fmt.Errorf("jetstream: in-process connect: %w", err)
	}
	bc := oc.Bus
	if sc.Memory {
		bc.Storage = "memory"
	}
	b, err := New(nc, bc)
	if err != nil {
		nc.Close()
		stop()
		return nil, err
	}
	b.ownConn = true
	b.srv = srv
	b.dirLock = lock
	if sc.Memory {
		b.tempDir = srv.StoreDir()
	}
	return b, nil
}

// defaultReplicas is 3 on a cluster of three or more nodes (so that a
// node can fail without losing an acknowledged event), else 1.
func defaultReplicas(nc *nats.Conn) int {
	if nc.ConnectedClusterName() != "" && len(nc.Servers()) >= 3 {
		return 3
	}
	return 1
}

// checkEmbeddedReplicas refuses replicas beyond 1 on an embedded server
// that is not part of a cluster: every stream create (and so every
// publish) would fail later.
func checkEmbeddedReplicas(c Config, sc ServerConfig) error {
	if sc.Options != nil && (sc.Options.Cluster.Port != 0 || len(sc.Options.Routes) > 0) {
		return nil
	}
	if c.Replicas > 1 {
		return fmt.Errorf("%w: replicas %d needs a NATS cluster, and the embedded server is a single node: use replicas 1, or run against a cluster with -nats-url", ErrBadServerConfig, c.Replicas)
	}
	for _, t := range c.Topics {
		if t.Replicas > 1 {
			return fmt.Errorf("%w: topic %s: replicas %d needs a NATS cluster, and the embedded server is a single node: use replicas 1, or run against a cluster with -nats-url", ErrBadServerConfig, t.Pattern, t.Replicas)
		}
	}
	return nil
}

// connectionLogging logs when the connection to an external server drops
// and when it is back, with the server and how long it was down. A
// connection that is down no longer names its server, so the one it was
// connected to is remembered.
func connectionLogging(log *slog.Logger) []nats.Option {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var downSince atomic.Int64 // UnixNano; 0 while connected
	var server atomic.Pointer[string]
	remember := func(nc *nats.Conn) string {
		s := RedactURL(nc.ConnectedUrlRedacted())
		if s != "" {
			server.Store(&s)
		}
		return s
	}
	return []nats.Option{
		nats.ConnectHandler(func(nc *nats.Conn) { remember(nc) }),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			downSince.CompareAndSwap(0, time.Now().UnixNano())
			var s string
			if p := server.Load(); p != nil {
				s = *p
			}
			log.Warn("NATS connection lost; reconnecting (publishes fail with unavailable while it is down)",
				"server", s, "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			var down time.Duration
			if since := downSince.Swap(0); since != 0 {
				down = time.Since(time.Unix(0, since)).Round(time.Millisecond)
			}
			log.Info("NATS connection restored", "server", remember(nc), "down_for", down)
		}),
	}
}

// ping checks that JetStream answers.
func (b *Bus) ping(ctx context.Context) error {
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	if _, err := b.js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("%w: jetstream account info: %w", facade.ErrUnavailable, err)
	}
	return nil
}

// Server returns the embedded server, or nil when the bus uses an external one.
func (b *Bus) Server() *server.Server { return b.srv }

// Conn returns the bus's NATS connection. Do not close it.
func (b *Bus) Conn() *nats.Conn { return b.nc }

// JetStream returns the bus's JetStream handle, for operations the facade
// does not cover.
func (b *Bus) JetStream() jetstream.JetStream { return b.js }

// Ready reports whether JetStream answers within ctx.
func (b *Bus) Ready(ctx context.Context) error {
	if b.isClosed() || b.nc.IsClosed() {
		return facade.ErrClosed
	}
	return b.ping(ctx)
}

// Close stops every subscription (waiting for running handlers and handing
// unacknowledged events back), then releases what the bus owns. It is
// idempotent.
func (b *Bus) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return b.Shutdown(ctx)
}

// Shutdown is Close bounded by ctx; it returns ctx.Err() if subscriptions did
// not stop in time (the owned connection and server are closed regardless).
func (b *Bus) Shutdown(ctx context.Context) error {
	b.subsMu.Lock()
	if b.closed {
		b.subsMu.Unlock()
		return nil
	}
	b.closed = true
	close(b.done)
	_ = b.terminations.Unsubscribe()
	all := make([]*subscription, 0, len(b.subs))
	for s := range b.subs {
		all = append(all, s)
	}
	b.subsMu.Unlock()

	var errs []error
	for _, s := range all {
		if err := s.stop(ctx, fmt.Errorf("%w: the bus closed", facade.ErrClosed)); err != nil {
			errs = append(errs, err)
		}
	}
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	stopCopies := context.AfterFunc(ctx, b.cancelCopying)
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	stopCopies()
	b.cancelCopying()
	b.expiry.close()
	for _, s := range all {
		// A member that did not stop in time: what it holds for its pull
		// request to go is handed back now, before the connection closes.
		s.flushHandBacks()
	}
	if b.ownConn {
		// Flush acks and naks before closing.
		_ = b.nc.FlushTimeout(2 * time.Second)
		b.nc.Close()
	}
	if b.srv != nil {
		b.srv.Shutdown()
		b.srv.WaitForShutdown()
	}
	if b.dirLock != nil {
		b.dirLock.Close()
	}
	if b.tempDir != "" {
		os.RemoveAll(b.tempDir)
	}
	return errors.Join(errs...)
}

func (b *Bus) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, b.cfg.RequestTimeout)
}

func (b *Bus) isClosed() bool {
	b.subsMu.RLock()
	defer b.subsMu.RUnlock()
	return b.closed
}

// ErrServerTooOld is returned for NATS servers older than 2.14, which lack the
// consumer reset that positions groups.
var ErrServerTooOld = errors.New("jetstream: nats-server 2.14 or newer is required (consumer reset)")

func checkServerVersion(nc *nats.Conn) error {
	v := nc.ConnectedServerVersion()
	if v == "" {
		return nil // not connected yet; the first API call reports problems
	}
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil {
		return nil
	}
	if major < 2 || major == 2 && minor < 14 {
		return fmt.Errorf("%w: connected to %s", ErrServerTooOld, v)
	}
	return nil
}
