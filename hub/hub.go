// Package hub assembles eventhub's components (the bus on an embedded or
// external NATS server, and the servers that front it) from one Config, and
// runs them until their context ends. cmd/eventhub only parses flags into a
// Config; tests start whole hubs in-process through this package.
package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/compaction"
	"github.com/eventhub/eventhub/examples/projector"
	"github.com/eventhub/eventhub/gateway"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/limits"
	"github.com/eventhub/eventhub/metrics"
	"github.com/eventhub/eventhub/outbox"
	_ "github.com/eventhub/eventhub/outbox/postgres" // OutboxURL may name either database
	_ "github.com/eventhub/eventhub/outbox/sqlite"
)

// Config configures a hub. The zero value runs an embedded NATS server with
// file storage in ./data, its client port on a free port of 127.0.0.1.
type Config struct {
	// NATSURL selects an external NATS server or cluster; empty runs the
	// embedded server.
	NATSURL string
	// NATSCreds, NATSUser/NATSPassword and NATSToken authenticate to an
	// external server.
	NATSCreds    string
	NATSUser     string
	NATSPassword string
	NATSToken    string
	// NATSCalloutSeed, with an external server, runs the hub as that
	// server's auth callout service (nats-server 2.10+): the account nkey
	// seed whose public key the servers' auth_callout issuer names. Native
	// clients then get the rights their hub token gives (see
	// deploy/nats/callout.conf). Needs Auth.
	NATSCalloutSeed string

	// Embedded server settings.
	DataDir  string
	Memory   bool
	NATSHost string // default 127.0.0.1
	NATSPort int    // 0 picks a free port; -1 disables the client port
	Sync     string // jetstream.SyncDefault or jetstream.SyncAlways

	// Topics configures streams (see jetstream.TopicConfig).
	Bus jetstream.Config

	// Auth turns on authentication for every way in; off, every listener
	// stays on loopback.
	Auth auth.Config

	// Host is the listen host of the hub's HTTP servers (default
	// 127.0.0.1). Beyond loopback it needs Auth.
	Host string
	// AllowedHosts are further names (Host headers, without port) that
	// the HTTP, WebSocket and ops servers answer to while authentication
	// is off; loopback addresses, localhost and Host always are. With
	// auth on every name is answered.
	AllowedHosts []string
	// OpsPort serves /metrics and the ops endpoints (0: a free port, -1:
	// none).
	OpsPort int
	// WSPort serves the WebSocket gateway on "/" and "/ws"; HTTPPort serves
	// POST /publish/{topic}, the WebSocket gateway on "/ws", the ops
	// endpoints under /ops/ and the dashboard (0: a free port, -1: none).
	WSPort   int
	HTTPPort int
	// Gateway holds the gateway's settings (origins, limits, leases); its
	// authentication comes from Auth.
	Gateway gateway.Config

	// Compactors keep compacted snapshot topics of full-history topics.
	Compactors []compaction.Config
	// Projector runs the heartbeat.received → process.state projector;
	// Demo runs it and publishes sample heartbeats. ProjectorConfig sets
	// the projector's topics, group and timings.
	Projector       bool
	Demo            bool
	ProjectorConfig projector.Config

	// OutboxURL, when set, runs an outbox drainer inside the hub on that
	// database (postgres://… or a SQLite path), in table OutboxTable
	// (default outbox.DefaultTable).
	OutboxURL   string
	OutboxTable string
	Outbox      outbox.Config

	// Ops holds the limits of the ops endpoints and replay.
	Ops OpsConfig

	// Limits are the rate limits and quotas of publishes, connections,
	// subscriptions and creations (the config file's "limits:").
	Limits limits.Config

	// Metrics bounds the metrics' label cardinality.
	Metrics metrics.Config

	// ShutdownTimeout bounds graceful shutdown (default 30s).
	ShutdownTimeout time.Duration

	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.NATSHost == "" {
		c.NATSHost = "127.0.0.1"
	}
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.Sync == "" {
		c.Sync = jetstream.SyncDefault
	}
	if c.DataDir == "" {
		c.DataDir = "data"
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// ErrInsecureListen is returned when a listener would be reachable beyond
// loopback without authentication.
var ErrInsecureListen = errors.New("hub: refusing to listen beyond loopback without authentication")

// Validate reports settings that cannot work or are unsafe.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.NATSURL == "" && c.NATSPort != -1 && !IsLoopback(c.NATSHost) && !c.Auth.Enabled() {
		return fmt.Errorf("%w: the embedded NATS client port on %s (configure a token or JWT auth, keep it on 127.0.0.1, or disable it with port -1)", ErrInsecureListen, c.NATSHost)
	}
	if !IsLoopback(c.Host) && !c.Auth.Enabled() {
		return fmt.Errorf("%w: HTTP and WebSocket servers on %s (set WS_TOKEN or JWT auth, or keep them on 127.0.0.1)", ErrInsecureListen, c.Host)
	}
	if c.NATSCalloutSeed != "" && (c.NATSURL == "" || !c.Auth.Enabled()) {
		return errors.New("hub: the NATS auth callout needs an external server (NATS_URL) and hub auth (a token or JWT)")
	}
	switch c.Sync {
	case jetstream.SyncDefault, jetstream.SyncAlways:
	default:
		return fmt.Errorf("hub: sync %q: want %q or %q", c.Sync, jetstream.SyncDefault, jetstream.SyncAlways)
	}
	if err := c.Limits.Validate(); err != nil {
		return err
	}
	if err := c.Gateway.Validate(); err != nil {
		return err
	}
	if err := c.Outbox.Validate(); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	if c.OutboxTable != "" {
		if err := (outbox.StoreConfig{Dialect: outbox.Postgres, Table: c.OutboxTable}).Validate(); err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
	}
	if c.Projector || c.Demo {
		if err := c.ProjectorConfig.Validate(); err != nil {
			return err
		}
	}
	for i, cc := range c.Compactors {
		if err := cc.Validate(); err != nil {
			return fmt.Errorf("compactors[%d]: %w", i, err)
		}
	}
	if err := c.Ops.validate(); err != nil {
		return err
	}
	if !c.Limits.Account.IsZero() && c.NATSURL != "" {
		return errors.New("hub: limits.account applies to the embedded server; set an external server's account limits in its own configuration")
	}
	return c.Bus.Validate()
}

// IsLoopback reports whether host (a name or an address) only listens on the
// loopback interface. "" and "0.0.0.0" mean every interface.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// Hub is a running hub.
type Hub struct {
	cfg      Config
	log      *slog.Logger
	Bus      *jetstream.Bus
	Auth     *auth.Authenticator
	Registry *prometheus.Registry
	Metrics  *metrics.Metrics

	servers    servers
	gateway    *gateway.Gateway
	compactors []*compaction.Compactor
	projector  *projector.Projector
	stopDemo   context.CancelFunc
	drainer    *outbox.Drainer
	outbox     *outbox.Store
	callout    *auth.Callout
	streamAPI  *auth.StreamNames    // scoped native clients' stream lookups
	catalogue  *jetstream.Catalogue // streams and groups, for native clients' grants
	nativeAuth *auth.NATS           // nil: native clients not authenticated by the hub
	limiter    *limits.Limiter      // nil: nothing limited
	bg         sync.WaitGroup       // background components
	cancel     context.CancelFunc
}

// Start starts the hub's components and returns once they are ready.
func Start(ctx context.Context, cfg Config) (*Hub, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults().withDerivedTopics()
	log := cfg.Logger
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	au, err := auth.New(bg, cfg.Auth)
	if err != nil {
		cancel()
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(reg, cfg.Metrics)
	if err != nil {
		au.Close()
		cancel()
		return nil, err
	}
	var lim *limits.Limiter
	if cfg.Limits.Enabled() {
		lc := cfg.Limits
		lc.OnThrottle = m.Throttled
		if lim, err = limits.New(lc); err != nil {
			au.Close()
			cancel()
			return nil, err
		}
	}
	var na *auth.NATS
	bc := cfg.Bus
	bc.Logger = log
	bc.Observer = m
	if lim != nil {
		bc.Guard = lim
	}
	oc := jetstream.OpenConfig{URL: cfg.NATSURL, Bus: bc}
	var callout *auth.Callout
	if cfg.NATSURL != "" {
		oc.NATSOptions = natsAuth(cfg)
		if cfg.NATSCalloutSeed != "" {
			na = auth.NewNATS(au, log.With("component", "nats-auth"), nil)
			if callout, err = auth.NewCallout(na, cfg.NATSCalloutSeed); err != nil {
				au.Close()
				cancel()
				return nil, err
			}
			oc.NATSOptions = append(oc.NATSOptions, nats.CustomInboxPrefix(na.HubInboxPrefix()))
		}
	} else {
		oc.Server = jetstream.ServerConfig{
			DataDir: cfg.DataDir, Memory: cfg.Memory, Host: cfg.NATSHost, Port: cfg.NATSPort,
			Sync: cfg.Sync, Logger: log.With("component", "nats-server"),
		}
		if au.Configured() {
			na = auth.NewNATS(au, log.With("component", "nats-auth"), nil)
			oc.Server.Options = &server.Options{CustomClientAuthentication: na}
			oc.NATSOptions = []nats.Option{nats.Token(na.HubToken()), nats.CustomInboxPrefix(na.HubInboxPrefix())}
		}
	}
	bus, err := jetstream.Open(ctx, oc)
	if err != nil {
		au.Close()
		cancel()
		return nil, err
	}
	var streamAPI *auth.StreamNames
	var catalogue *jetstream.Catalogue
	if na != nil {
		if catalogue, err = bus.WatchCatalogue(ctx); err != nil {
			_ = bus.Shutdown(context.WithoutCancel(ctx))
			au.Close()
			cancel()
			return nil, err
		}
		na.SetDirectory(busDirectory{bus, catalogue})
		if srv := bus.Server(); srv != nil && !cfg.Auth.NativeScoped {
			// Scoped clients get accounts of their own (NativeScoped off):
			// their stream lookups are answered before the first connects.
			if streamAPI, err = na.ServeStreamNames(bus.Conn()); err != nil {
				catalogue.Close()
				_ = bus.Shutdown(context.WithoutCancel(ctx))
				au.Close()
				cancel()
				return nil, err
			}
			na.SetServer(srv)
		}
	}
	h := &Hub{cfg: cfg, log: log, Bus: bus, Auth: au, Registry: reg, Metrics: m, cancel: cancel, limiter: lim, streamAPI: streamAPI, catalogue: catalogue, nativeAuth: na}
	if err := h.startLimits(ctx); err != nil {
		na.Close()
		catalogue.Close()
		_ = bus.Shutdown(context.WithoutCancel(ctx))
		au.Close()
		cancel()
		return nil, err
	}
	if callout != nil {
		if err := callout.Start(bus.Conn()); err != nil {
			na.Close()
			catalogue.Close()
			_ = bus.Shutdown(context.WithoutCancel(ctx))
			au.Close()
			cancel()
			return nil, err
		}
		h.callout = callout
		log.Info("auth callout service running", "issuer", callout.Issuer())
	}
	if srv := bus.Server(); srv != nil {
		reg.MustRegister(metrics.NewServerCollector(srv))
	}
	if err := h.startComponents(ctx, bg); err != nil {
		_ = h.Shutdown(context.WithoutCancel(ctx))
		return nil, err
	}
	h.logStart()
	return h, nil
}

// durability says what a stored event survives, for the start-up log and
// /readyz.
func (h *Hub) durability() string {
	c := h.cfg
	switch {
	case c.NATSURL != "":
		return "as configured on the NATS servers (sync_interval, stream replicas)"
	case c.Memory:
		return "none: memory storage, nothing survives a restart"
	case c.Sync == jetstream.SyncAlways:
		return "sync always: every write is fsynced before it is acknowledged; events survive power loss"
	}
	return "sync default: a publish is acknowledged before it is on disk; events survive a killed process, not a power cut (fsync every 2 min)"
}

func (h *Hub) logStart() {
	c := h.cfg
	if c.NATSURL != "" {
		h.log.Info("bus on external NATS", "url", jetstream.RedactURL(c.NATSURL), "durability", h.durability())
		return
	}
	storage := "file in " + c.DataDir
	if c.Memory {
		storage = "memory"
	}
	nats := "disabled"
	if srv := h.Bus.Server(); srv != nil && c.NATSPort != -1 {
		nats = srv.ClientURL()
	}
	natsAuth := "none: loopback only"
	if h.Auth.Configured() {
		natsAuth = "hub tokens (static or JWT) mapped to subject permissions"
	}
	h.log.Info("bus on embedded NATS", "storage", storage, "sync", c.Sync, "durability", h.durability(),
		"nats_clients", nats, "nats_auth", natsAuth)
}

// startComponents provisions configured topics and starts what runs in
// front of and beside the bus.
func (h *Hub) startComponents(ctx, bg context.Context) error {
	c := h.cfg
	if err := h.Bus.Provision(ctx); err != nil {
		return err
	}
	if err := h.startWorkers(ctx, bg); err != nil {
		return err
	}
	if c.OutboxURL != "" {
		if err := h.startOutbox(ctx, bg); err != nil {
			return err
		}
	}
	if err := h.startFront(); err != nil {
		return err
	}
	if c.OpsPort != -1 {
		oh, err := h.opsHandler()
		if err != nil {
			return err
		}
		if err := h.servers.serve("ops", c.Host, c.OpsPort, h.hostGuard(oh), h.fail); err != nil {
			return err
		}
		h.log.Info("ops listening", "addr", h.servers.addr("ops"), "auth", h.Auth.Configured())
	}
	return nil
}

func (h *Hub) startOutbox(ctx, bg context.Context) error {
	st, err := outbox.OpenConfig(ctx, h.cfg.OutboxURL, outbox.StoreConfig{Table: h.cfg.OutboxTable})
	if err != nil {
		return err // the outbox's errors name it
	}
	oc := h.cfg.Outbox
	oc.Logger = h.log
	d, err := outbox.NewDrainer(st, h.Bus, oc)
	if err != nil {
		st.Close()
		return err
	}
	h.outbox, h.drainer = st, d
	h.Registry.MustRegister(metrics.NewOutboxCollector(d, st))
	h.bg.Go(func() {
		if err := d.Run(bg); err != nil && !errors.Is(err, context.Canceled) {
			h.fail(fmt.Errorf("outbox drainer: %w", err))
		}
	})
	h.log.Info("outbox drainer running", "table", st.Table(), "dialect", st.Dialect(),
		"retry_horizon", d.Config().RetryHorizon(),
		"note", "outbox topics need a duplicate window of at least the retry horizon")
	return nil
}

// fail logs a component's failure.
func (h *Hub) fail(err error) { h.log.Error("component failed", "err", err) }

// Addr returns the bound address of a listener ("ops", "ws", "http"), or "".
func (h *Hub) Addr(name string) string { return h.servers.addr(name) }

// Shutdown stops the hub's components in reverse start order: listeners and
// the gateway (sessions hand their events back), the outbox drainer, the
// demo, projector and compactors, the bus (handing unacked events back),
// then auth.
func (h *Hub) Shutdown(ctx context.Context) error {
	var errs []error
	errs = append(errs, h.servers.shutdown(ctx))
	if h.gateway != nil {
		errs = append(errs, h.gateway.Shutdown(ctx))
	}
	if h.drainer != nil {
		errs = append(errs, h.drainer.Shutdown(ctx))
	}
	if h.stopDemo != nil {
		h.stopDemo()
	}
	if h.projector != nil {
		errs = append(errs, h.projector.Shutdown(ctx))
	}
	for _, c := range h.compactors {
		errs = append(errs, c.Shutdown(ctx))
	}
	h.cancel()
	h.bg.Wait()
	if h.outbox != nil {
		errs = append(errs, h.outbox.Close())
	}
	if h.callout != nil {
		errs = append(errs, h.callout.Close())
	}
	if h.streamAPI != nil {
		errs = append(errs, h.streamAPI.Close())
	}
	h.nativeAuth.Close()
	h.catalogue.Close()
	errs = append(errs, h.Bus.Shutdown(ctx))
	h.Auth.Close()
	return errors.Join(errs...)
}

// NativeAccounts returns the number of NATS accounts the scoped native
// clients of the embedded server hold (one per connected principal and
// policy), and of freed ones kept for the next principals; zeros when the
// hub does not authenticate native clients.
func (h *Hub) NativeAccounts() (held, idle int) {
	if h.nativeAuth == nil {
		return 0, 0
	}
	return h.nativeAuth.Accounts()
}

// Run starts the hub, waits until ctx ends, then shuts it down within
// Config.ShutdownTimeout.
func Run(ctx context.Context, cfg Config) error {
	h, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	h.log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.ShutdownTimeout)
	defer cancel()
	return h.Shutdown(sctx)
}

func natsAuth(c Config) []nats.Option {
	var opts []nats.Option
	if c.NATSCreds != "" {
		opts = append(opts, nats.UserCredentials(c.NATSCreds))
	}
	if c.NATSUser != "" {
		opts = append(opts, nats.UserInfo(c.NATSUser, c.NATSPassword))
	}
	if c.NATSToken != "" {
		opts = append(opts, nats.Token(c.NATSToken))
	}
	return opts
}
