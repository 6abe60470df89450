package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/jetstream"
)

// flags binds flags whose defaults come from the environment. A malformed
// environment value is an error naming the variable, reported by parse.
type flags struct {
	fs     *flag.FlagSet
	getenv func(string) string
	errs   []error
}

func newFlags(fs *flag.FlagSet, getenv func(string) string) *flags {
	return &flags{fs: fs, getenv: getenv}
}

// parse reports the malformed environment values, then parses args.
// -h and -help print the flags and return flag.ErrHelp.
func (f *flags) parse(args []string) error {
	if len(f.errs) > 0 {
		return errors.Join(f.errs...)
	}
	return f.fs.Parse(args)
}

// env returns the named variable and whether it is set to something.
func (f *flags) env(name string) (string, bool) {
	v := f.getenv(name)
	return v, v != ""
}

func (f *flags) bad(env, v, want string) {
	f.errs = append(f.errs, fmt.Errorf("environment variable %s=%q is not %s", env, v, want))
}

func (f *flags) str(p *string, name, env, def, help string) {
	if v, ok := f.env(env); ok {
		def = v
	}
	f.fs.StringVar(p, name, def, help+" ($"+env+")")
}

func (f *flags) int(p *int, name, env string, def int, help string) {
	if v, ok := f.env(env); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			f.bad(env, v, "an integer")
		}
		def = n
	}
	f.fs.IntVar(p, name, def, help+" ($"+env+")")
}

func (f *flags) dur(p *time.Duration, name, env string, def time.Duration, help string) {
	if v, ok := f.env(env); ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			f.bad(env, v, "a duration (such as 5s or 1m30s)")
		}
		def = d
	}
	f.fs.DurationVar(p, name, def, help+" ($"+env+")")
}

func (f *flags) bool(p *bool, name, env string, def bool, help string) {
	if v, ok := f.env(env); ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			f.bad(env, v, "a boolean (true or false)")
		}
		def = b
	}
	f.fs.BoolVar(p, name, def, help+" ($"+env+")")
}

// parseServe turns flags and environment into a hub configuration.
func parseServe(args []string, getenv func(string) string, stderr io.Writer) (hub.Config, *slog.Logger, error) {
	var c hub.Config
	var configFile, logLevel, logFormat string
	fs := flag.NewFlagSet("eventhub serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := newFlags(fs, getenv)
	f.str(&c.NATSURL, "nats-url", "NATS_URL", "", "external NATS server or cluster URL(s); empty runs an embedded server")
	f.str(&c.NATSCreds, "nats-creds", "NATS_CREDS", "", "credentials file for the external NATS server")
	f.str(&c.NATSUser, "nats-user", "NATS_USER", "", "user for the external NATS server")
	f.str(&c.NATSPassword, "nats-password", "NATS_PASSWORD", "", "password for the external NATS server")
	f.str(&c.NATSToken, "nats-token", "NATS_TOKEN", "", "token for the external NATS server")
	f.str(&c.NATSCalloutSeed, "nats-callout-seed", "NATS_CALLOUT_SEED", "", "account nkey seed (SA…): run as the external NATS server's auth callout service (deploy/nats/callout.conf)")
	f.str(&c.DataDir, "data-dir", "EVENTHUB_DATA_DIR", "data", "embedded server: JetStream storage directory")
	f.bool(&c.Memory, "memory", "EVENTHUB_MEMORY", false, "embedded server: keep everything in memory (throwaway runs)")
	f.str(&c.NATSHost, "nats-host", "EVENTHUB_NATS_HOST", "127.0.0.1", "embedded server: host of the NATS client port")
	f.int(&c.NATSPort, "nats-port", "EVENTHUB_NATS_PORT", 4222, "embedded server: NATS client port for existing NATS clients (-1 disables)")
	f.str(&c.Sync, "sync", "EVENTHUB_SYNC", jetstream.SyncDefault, "embedded server durability: default (ack before fsync) or always (fsync every write)")
	f.str(&configFile, "config", "EVENTHUB_CONFIG", "", "YAML file with topic stream settings")
	f.str(&c.Host, "host", "EVENTHUB_HOST", "127.0.0.1", "listen host of the WebSocket, HTTP and ops servers (beyond loopback only with auth)")
	f.int(&c.OpsPort, "ops-port", "OPS_PORT", 8082, "ops port: /metrics, /healthz, /readyz and the ops endpoints (-1 disables)")
	f.int(&c.WSPort, "ws-port", "WS_PORT", 8090, "WebSocket gateway port, on / and /ws (-1 disables)")
	f.int(&c.HTTPPort, "http-port", "HTTP_PORT", 8081, "HTTP port: POST /publish/{topic}, /ws, /ops/ and the dashboard (-1 disables)")
	var origins, hosts string
	f.str(&hosts, "allowed-hosts", "EVENTHUB_ALLOWED_HOSTS", "", "comma-separated host names served without auth besides loopback and localhost (DNS-rebinding guard)")
	f.str(&origins, "allowed-origins", "WS_ALLOWED_ORIGINS", "", "comma-separated origins allowed besides the gateway's own (\"*\" for any)")
	f.bool(&c.Projector, "projector", "EVENTHUB_PROJECTOR", false, "run the heartbeat.received → process.state projector")
	f.bool(&c.Demo, "demo", "EVENTHUB_DEMO", false, "run the projector and publish sample heartbeats (a live process.state to watch)")
	f.str(&c.OutboxURL, "outbox-db", "OUTBOX_DB_URL", "", "run an outbox drainer on this database (postgres://… or a SQLite file)")
	var jwtSecret string
	f.str(&c.Auth.Token, "ws-token", "WS_TOKEN", "", "static token (at least 16 characters) that grants everything, for WS, HTTP and native NATS clients")
	f.str(&jwtSecret, "jwt-secret", "JWT_SECRET", "", "HS256 secret (at least 32 bytes) of accepted JWTs")
	f.str(&c.Auth.JWT.JWKSURL, "jwt-jwks-url", "JWT_JWKS_URL", "", "JWKS URL of the keys of accepted RS256/ES256/EdDSA JWTs")
	f.str(&c.Auth.JWT.Audience, "jwt-aud", "JWT_AUD", "", "required JWT audience")
	f.str(&c.Auth.JWT.Issuer, "jwt-iss", "JWT_ISS", "", "required JWT issuer")
	f.dur(&c.Auth.JWT.Leeway, "jwt-leeway", "JWT_LEEWAY", 5*time.Second, "clock leeway for exp/nbf")
	f.str(&logLevel, "log-level", "LOG_LEVEL", "info", "debug, info, warn or error")
	f.str(&logFormat, "log-format", "LOG_FORMAT", "text", "text or json")
	if err := f.parse(args); err != nil {
		return c, nil, err
	}
	if fs.NArg() > 0 {
		return c, nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	log, err := newLogger(stderr, logLevel, logFormat)
	if err != nil {
		return c, nil, err
	}
	c.Logger = log
	c.Auth.JWT.Secret = []byte(jwtSecret)
	for o := range strings.SplitSeq(origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			c.Gateway.AllowedOrigins = append(c.Gateway.AllowedOrigins, o)
		}
	}
	for n := range strings.SplitSeq(hosts, ",") {
		if n = strings.TrimSpace(n); n != "" {
			c.AllowedHosts = append(c.AllowedHosts, n)
		}
	}
	if configFile != "" {
		fc, err := hub.LoadConfigFile(configFile)
		if err != nil {
			return c, nil, err
		}
		c.Bus, c.Compactors, c.Limits = fc.Config, fc.Compactors, fc.Limits
	}
	return c, log, c.Validate()
}

func serve(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	c, log, err := parseServe(args, getenv, stderr)
	if err != nil {
		return err
	}
	log.Info("eventhub starting", "version", version())
	return hub.Run(ctx, c)
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
