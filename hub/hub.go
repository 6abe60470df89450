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
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/jetstream"
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

	// ShutdownTimeout bounds graceful shutdown (default 30s).
	ShutdownTimeout time.Duration

	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.NATSHost == "" {
		c.NATSHost = "127.0.0.1"
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
	switch c.Sync {
	case jetstream.SyncDefault, jetstream.SyncAlways:
	default:
		return fmt.Errorf("hub: sync %q: want %q or %q", c.Sync, jetstream.SyncDefault, jetstream.SyncAlways)
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
	cfg  Config
	log  *slog.Logger
	Bus  *jetstream.Bus
	Auth *auth.Authenticator

	cancel context.CancelFunc // ends background work (JWKS refresh)
}

// Start starts the hub's components and returns once they are ready.
func Start(ctx context.Context, cfg Config) (*Hub, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	au, err := auth.New(bg, cfg.Auth)
	if err != nil {
		cancel()
		return nil, err
	}
	bc := cfg.Bus
	bc.Logger = log
	oc := jetstream.OpenConfig{URL: cfg.NATSURL, Bus: bc}
	if cfg.NATSURL != "" {
		oc.NATSOptions = natsAuth(cfg)
	} else {
		oc.Server = jetstream.ServerConfig{
			DataDir: cfg.DataDir, Memory: cfg.Memory, Host: cfg.NATSHost, Port: cfg.NATSPort,
			Sync: cfg.Sync, Logger: log.With("component", "nats-server"),
		}
		if au.Configured() {
			na := auth.NewNATS(au, log.With("component", "nats-auth"), nil)
			oc.Server.Options = &server.Options{CustomClientAuthentication: na}
			oc.NATSOptions = []nats.Option{nats.Token(na.HubToken())}
		}
	}
	bus, err := jetstream.Open(ctx, oc)
	if err != nil {
		au.Close()
		cancel()
		return nil, err
	}
	h := &Hub{cfg: cfg, log: log, Bus: bus, Auth: au, cancel: cancel}
	if err := bus.Provision(ctx); err != nil {
		_ = h.Shutdown(context.WithoutCancel(ctx))
		return nil, err
	}
	h.logStart()
	return h, nil
}

func (h *Hub) logStart() {
	c := h.cfg
	if c.NATSURL != "" {
		h.log.Info("bus on external NATS", "url", jetstream.RedactURL(c.NATSURL),
			"durability", "as configured on the NATS servers (sync_interval, stream replicas)")
		return
	}
	durability := "default: a publish is acknowledged before it is on disk; events survive a killed process, not a power cut (fsync every 2 min)"
	if c.Sync == jetstream.SyncAlways {
		durability = "always: every write is fsynced before it is acknowledged; events survive power loss"
	}
	storage := "file in " + c.DataDir
	if c.Memory {
		storage = "memory (nothing survives a restart)"
		durability = "none: memory storage"
	}
	nats := "disabled"
	if srv := h.Bus.Server(); srv != nil && c.NATSPort != -1 {
		nats = srv.ClientURL()
	}
	natsAuth := "none: loopback only"
	if h.Auth.Configured() {
		natsAuth = "hub tokens (static or JWT) mapped to subject permissions"
	}
	h.log.Info("bus on embedded NATS", "storage", storage, "sync", c.Sync, "durability", durability,
		"nats_clients", nats, "nats_auth", natsAuth)
}

// Shutdown stops the hub's components in reverse start order.
func (h *Hub) Shutdown(ctx context.Context) error {
	err := h.Bus.Shutdown(ctx)
	h.Auth.Close()
	h.cancel()
	return err
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
