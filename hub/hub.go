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
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/compaction"
	"github.com/eventhub/eventhub/gateway"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/limits"
	"github.com/eventhub/eventhub/metrics"
	"github.com/eventhub/eventhub/outbox"
	_ "github.com/eventhub/eventhub/outbox/postgres" // OutboxURL may name either database
	_ "github.com/eventhub/eventhub/outbox/sqlite"
	"github.com/eventhub/eventhub/projector"
	"github.com/eventhub/eventhub/tracing"
)

func (c Config) withDefaults() Config {
	n, s := &c.NATS, &c.Server
	n.Host = or(n.Host, "127.0.0.1")
	n.Sync = or(n.Sync, jetstream.SyncDefault)
	n.DataDir = or(n.DataDir, "data")
	s.Host = or(s.Host, "127.0.0.1")
	if s.ShutdownTimeout <= 0 {
		s.ShutdownTimeout = 30 * time.Second
	}
	c.Log.Level = or(c.Log.Level, "info")
	c.Log.Format = or(c.Log.Format, "text")
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// ErrInsecureListen is returned when a listener would be reachable beyond
// loopback without authentication.
var ErrInsecureListen = errors.New("hub: refusing to listen beyond loopback without authentication")

// Validate reports settings that cannot work or are unsafe, and a log level
// or format the hub does not know.
func (c Config) Validate() error {
	c = c.withDefaults()
	n := c.NATS
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.Log.Level)); err != nil {
		return fmt.Errorf("log level %q (-log-level, $LOG_LEVEL, log.level): want debug, info, warn or error", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		return fmt.Errorf("log format %q (-log-format, $LOG_FORMAT, log.format): want text or json", c.Log.Format)
	}
	switch n.Sync {
	case jetstream.SyncDefault, jetstream.SyncAlways:
	default:
		return fmt.Errorf("sync %q (-sync, $EVENTHUB_SYNC, nats.sync): want %q or %q", n.Sync, jetstream.SyncDefault, jetstream.SyncAlways)
	}
	if n.URL == "" && n.Port != -1 && !IsLoopback(n.Host) && !c.Auth.Enabled() {
		return fmt.Errorf("%w: the embedded NATS client port on %s (configure a token or JWT auth, keep it on 127.0.0.1, or disable it with port -1)", ErrInsecureListen, n.Host)
	}
	if !IsLoopback(c.Server.Host) && !c.Auth.Enabled() {
		return fmt.Errorf("%w: HTTP and WebSocket servers on %s (set WS_TOKEN or JWT auth, or keep them on 127.0.0.1)", ErrInsecureListen, c.Server.Host)
	}
	if n.CalloutSeed != "" && (n.URL == "" || !c.Auth.Enabled()) {
		return errors.New("hub: the NATS auth callout needs an external server (NATS_URL) and hub auth (a token or JWT)")
	}
	if err := c.Limits.Validate(); err != nil {
		return err
	}
	if err := c.Tracing.Validate(); err != nil {
		return err
	}
	if err := c.Gateway.Validate(); err != nil {
		return err
	}
	if err := c.Outbox.Drainer.Validate(); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	if c.Outbox.Table != "" {
		if err := (outbox.StoreConfig{Dialect: outbox.Postgres, Table: c.Outbox.Table}).Validate(); err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
	}
	if c.Projector.Enabled || c.Projector.Demo {
		if err := c.Projector.Projector.Validate(); err != nil {
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
	if !c.Limits.Account.IsZero() && n.URL != "" {
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
	tracer     *sdktrace.TracerProvider // the hub's own; nil: none, or the caller's
}

// Start starts the hub's components and returns once they are ready. What
// it started before a failure is undone, in reverse order.
func Start(ctx context.Context, cfg Config) (_ *Hub, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults().withDerivedTopics()
	log := cfg.Logger
	var cleanup []func()
	defer func() {
		if err != nil {
			for _, undo := range slices.Backward(cleanup) {
				undo()
			}
		}
	}()
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cleanup = append(cleanup, cancel)
	au, err := auth.New(bg, cfg.Auth)
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, au.Close)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(reg, cfg.Metrics)
	if err != nil {
		return nil, err
	}
	var lim *limits.Limiter
	if cfg.Limits.Enabled() {
		lc := cfg.Limits
		lc.OnThrottle = m.Throttled
		if lim, err = limits.New(lc); err != nil {
			return nil, err
		}
	}
	var na *auth.NATS
	bc := cfg.Bus
	bc.Logger = log
	bc.Observer = m
	bc.TracerProvider = cfg.TracerProvider
	var tp *sdktrace.TracerProvider
	if bc.TracerProvider == nil {
		if tp, err = tracing.New(ctx, cfg.Tracing); err != nil {
			return nil, err
		}
		if tp != nil {
			bc.TracerProvider = tp
			cleanup = append(cleanup, func() { _ = tp.Shutdown(context.WithoutCancel(ctx)) })
			log.Info("tracing on: exporting spans over OTLP")
		}
	}
	if lim != nil {
		bc.Guard = lim
	}
	oc := jetstream.OpenConfig{URL: cfg.NATS.URL, Bus: bc}
	var callout *auth.Callout
	if cfg.NATS.URL != "" {
		oc.NATSOptions = natsAuth(cfg.NATS)
		if cfg.NATS.CalloutSeed != "" {
			na = auth.NewNATS(au, log.With("component", "nats-auth"), nil)
			if callout, err = auth.NewCallout(na, cfg.NATS.CalloutSeed); err != nil {
				return nil, err
			}
			oc.NATSOptions = append(oc.NATSOptions, nats.CustomInboxPrefix(na.HubInboxPrefix()))
		}
	} else {
		oc.Server = jetstream.ServerConfig{
			DataDir: cfg.NATS.DataDir, Memory: cfg.NATS.Memory, Host: cfg.NATS.Host, Port: cfg.NATS.Port,
			Sync: cfg.NATS.Sync, Logger: log.With("component", "nats-server"),
		}
		if au.Configured() {
			na = auth.NewNATS(au, log.With("component", "nats-auth"), nil)
			oc.Server.Options = &server.Options{CustomClientAuthentication: na}
			oc.NATSOptions = []nats.Option{nats.Token(na.HubToken()), nats.CustomInboxPrefix(na.HubInboxPrefix())}
		}
	}
	bus, err := jetstream.Open(ctx, oc)
	if err != nil {
		if errors.Is(err, jetstream.ErrPortInUse) {
			err = fmt.Errorf("%w (%s)", err, portSettings["nats"])
		}
		return nil, err
	}
	cleanup = append(cleanup, func() { _ = bus.Shutdown(context.WithoutCancel(ctx)) })
	var streamAPI *auth.StreamNames
	var catalogue *jetstream.Catalogue
	if na != nil {
		if catalogue, err = bus.WatchCatalogue(ctx); err != nil {
			return nil, err
		}
		cleanup = append(cleanup, catalogue.Close, na.Close)
		na.SetDirectory(busDirectory{bus, catalogue})
		if srv := bus.Server(); srv != nil && !cfg.Auth.NativeScoped {
			// Scoped clients get accounts of their own (NativeScoped off):
			// their stream lookups are answered before the first connects.
			if streamAPI, err = na.ServeStreamNames(bus.Conn()); err != nil {
				return nil, err
			}
			cleanup = append(cleanup, func() { _ = streamAPI.Close() })
			na.SetServer(srv)
		}
	}
	h := &Hub{cfg: cfg, log: log, Bus: bus, Auth: au, Registry: reg, Metrics: m, cancel: cancel, limiter: lim, streamAPI: streamAPI, catalogue: catalogue, nativeAuth: na, tracer: tp}
	if err := h.startLimits(ctx); err != nil {
		return nil, err
	}
	if callout != nil {
		if err := callout.Start(bus.Conn()); err != nil {
			return nil, err
		}
		h.callout = callout
		log.Info("auth callout service running", "issuer", callout.Issuer())
	}
	if srv := bus.Server(); srv != nil {
		reg.MustRegister(metrics.NewServerCollector(srv))
	}
	if err := h.startComponents(ctx, bg); err != nil {
		// From here on Shutdown undoes everything, what started so far too.
		cleanup = []func(){func() { _ = h.Shutdown(context.WithoutCancel(ctx)) }}
		return nil, err
	}
	h.logStart()
	return h, nil
}

// durability says what a stored event survives, for the start-up log and
// /readyz.
func (h *Hub) durability() string {
	c := h.cfg.NATS
	switch {
	case c.URL != "":
		return "as configured on the NATS servers (sync_interval, stream replicas)"
	case c.Memory:
		return "none: memory storage, nothing survives a restart"
	case c.Sync == jetstream.SyncAlways:
		return "sync always: every write is fsynced before it is acknowledged; events survive power loss"
	}
	return "sync default: a publish is acknowledged before it is on disk; events survive a killed process, not a power cut (fsync every 2 min)"
}

func (h *Hub) logStart() {
	c := h.cfg.NATS
	if c.URL != "" {
		h.log.Info("bus on external NATS", "url", jetstream.RedactURL(c.URL), "durability", h.durability())
		return
	}
	storage := "file in " + c.DataDir
	if c.Memory {
		storage = "memory"
	}
	nats := "disabled"
	if srv := h.Bus.Server(); srv != nil && c.Port != -1 {
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
	if c.Outbox.DB != "" {
		if err := h.startOutbox(ctx, bg); err != nil {
			return err
		}
	}
	if err := h.startFront(); err != nil {
		return err
	}
	if c.Server.OpsPort != -1 {
		oh, err := h.opsHandler()
		if err != nil {
			return err
		}
		if err := h.servers.serve("ops", c.Server.Host, c.Server.OpsPort, h.hostGuard(oh), h.fail); err != nil {
			return err
		}
		h.log.Info("ops listening", "addr", h.servers.addr("ops"), "auth", h.Auth.Configured())
	}
	return nil
}

func (h *Hub) startOutbox(ctx, bg context.Context) error {
	st, err := outbox.OpenConfig(ctx, h.cfg.Outbox.DB, outbox.StoreConfig{Table: h.cfg.Outbox.Table})
	if err != nil {
		return err // the outbox's errors name it
	}
	oc := h.cfg.Outbox.Drainer
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
	if h.tracer != nil {
		errs = append(errs, h.tracer.Shutdown(ctx)) // exports the last spans
	}
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
// Config.Server.ShutdownTimeout.
func Run(ctx context.Context, cfg Config) error {
	h, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	h.log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.Server.ShutdownTimeout)
	defer cancel()
	return h.Shutdown(sctx)
}

func natsAuth(c NATSConfig) []nats.Option {
	var opts []nats.Option
	if c.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	return opts
}
