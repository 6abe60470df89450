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

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/hub"
)

// flags binds flags whose defaults come from the environment. A malformed
// environment value is an error naming the variable, reported by parse.
type flags struct {
	fs     *flag.FlagSet
	getenv func(string) string
	errs   []error
	parsed []func() // run once the flags are parsed
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
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	for _, fn := range f.parsed {
		fn()
	}
	return nil
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

// secret binds a string flag that holds a secret (a token, a password, a
// key): -h says whether a value is set and where from, never the value.
func (f *flags) secret(p *string, name, env, def, help string) {
	note := ""
	if v, ok := f.env(env); ok {
		def, note = v, " (set from $"+env+")"
	} else if def != "" {
		note = " (set by the configuration file)"
	}
	f.fs.StringVar(p, name, "", help+" ($"+env+")"+note)
	*p = def // after StringVar, so that -h shows no default
}

// secretBytes binds a secret flag, as secret does, to a key held as bytes;
// *p is set when the flags are parsed.
func (f *flags) secretBytes(p *auth.Secret, name, env, help string) {
	s := new(string)
	f.secret(s, name, env, string(*p), help)
	f.parsed = append(f.parsed, func() { *p = auth.Secret(*s) })
}

// urls binds a flag of comma-separated URLs: -h shows its default with the
// passwords redacted, as eventhub config does.
func (f *flags) urls(p *string, name, env, def, help string) {
	if v, ok := f.env(env); ok {
		def = v
	}
	f.fs.StringVar(p, name, hub.RedactURLs(def), help+" ($"+env+")")
	*p = def // after StringVar, so that -h shows the redacted default
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

// list binds a comma-separated flag to *p.
func (f *flags) list(p *[]string, name, env, help string) {
	def := strings.Join(*p, ",")
	if v, ok := f.env(env); ok {
		def = v
	}
	split := func(s string) []string {
		var out []string
		for e := range strings.SplitSeq(s, ",") {
			if e = strings.TrimSpace(e); e != "" {
				out = append(out, e)
			}
		}
		return out
	}
	*p = split(def)
	f.fs.Func(name, help+" ($"+env+")"+defaultNote(def), func(s string) error {
		*p = split(s)
		return nil
	})
}

func defaultNote(def string) string {
	if def == "" {
		return ""
	}
	return fmt.Sprintf(" (default %q)", def)
}

// parseServe turns the configuration file, the environment and the flags
// into the hub's settings, in rising precedence: a flag wins over its
// environment variable, which wins over the file, which wins over the
// defaults (each flag's default is the value so far). The file is named by
// -config or $EVENTHUB_CONFIG.
func parseServe(args []string, getenv func(string) string, stderr io.Writer) (hub.Config, error) {
	// A first pass finds -config; its errors are the second pass's to report.
	scratch := hub.DefaultConfig()
	fs, _, configFile := serveFlags(&scratch, getenv, io.Discard)
	_ = fs.Parse(args)
	file := hub.DefaultConfig()
	if *configFile != "" {
		loaded, err := hub.LoadFile(*configFile)
		if err != nil {
			return file, err
		}
		file = loaded
	}
	fs, f, _ := serveFlags(&file, getenv, stderr)
	if err := f.parse(args); err != nil {
		return file, err
	}
	if fs.NArg() > 0 {
		return file, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return file, file.Validate()
}

// serveFlags binds the flags of eventhub serve (and eventhub config) to
// file's fields; each flag's default is the field's value, or its
// environment variable when that is set.
func serveFlags(file *hub.Config, getenv func(string) string, out io.Writer) (*flag.FlagSet, *flags, *string) {
	fs := flag.NewFlagSet("eventhub serve", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n\nflags of eventhub [serve] and eventhub config (each also read from the environment variable named):\n", usage)
		fs.PrintDefaults()
	}
	f := newFlags(fs, getenv)
	n, srv := &file.NATS, &file.Server
	f.urls(&n.URL, "nats-url", "NATS_URL", n.URL, "external NATS server or cluster URL(s); empty runs an embedded server")
	f.str(&n.Creds, "nats-creds", "NATS_CREDS", n.Creds, "credentials file for the external NATS server")
	f.str(&n.User, "nats-user", "NATS_USER", n.User, "user for the external NATS server")
	f.secret(&n.Password, "nats-password", "NATS_PASSWORD", n.Password, "password for the external NATS server")
	f.secret(&n.Token, "nats-token", "NATS_TOKEN", n.Token, "token for the external NATS server")
	f.secret(&n.CalloutSeed, "nats-callout-seed", "NATS_CALLOUT_SEED", n.CalloutSeed, "account nkey seed (SA…): run as the external NATS server's auth callout service (deploy/nats/callout.conf)")
	f.str(&n.DataDir, "data-dir", "EVENTHUB_DATA_DIR", n.DataDir, "embedded server: JetStream storage directory")
	f.bool(&n.Memory, "memory", "EVENTHUB_MEMORY", n.Memory, "embedded server: keep everything in memory (throwaway runs)")
	f.str(&n.Host, "nats-host", "EVENTHUB_NATS_HOST", n.Host, "embedded server: host of the NATS client port")
	f.int(&n.Port, "nats-port", "EVENTHUB_NATS_PORT", n.Port, "embedded server: NATS client port for existing NATS clients (-1 disables)")
	f.str(&n.Sync, "sync", "EVENTHUB_SYNC", n.Sync, "embedded server durability: default (ack before fsync) or always (fsync every write)")
	var configFile string
	f.str(&configFile, "config", "EVENTHUB_CONFIG", "", "YAML configuration file with every setting (see eventhub config); flags and environment variables override it")
	f.str(&srv.Host, "host", "EVENTHUB_HOST", srv.Host, "listen host of the WebSocket, HTTP and ops servers (beyond loopback only with auth)")
	f.int(&srv.OpsPort, "ops-port", "OPS_PORT", srv.OpsPort, "ops port: /metrics, /healthz, /readyz and the ops endpoints (-1 disables)")
	f.int(&srv.WSPort, "ws-port", "WS_PORT", srv.WSPort, "WebSocket gateway port, on / and /ws (-1 disables)")
	f.int(&srv.HTTPPort, "http-port", "HTTP_PORT", srv.HTTPPort, "HTTP port: POST /publish/{topic}, /ws, /ops/ and the dashboard (-1 disables)")
	f.list(&srv.AllowedHosts, "allowed-hosts", "EVENTHUB_ALLOWED_HOSTS", "comma-separated host names served without auth besides loopback and localhost (DNS-rebinding guard)")
	f.list(&file.Gateway.AllowedOrigins, "allowed-origins", "WS_ALLOWED_ORIGINS", "comma-separated origins allowed besides the gateway's own (\"*\" for any)")
	f.bool(&file.Projector.Enabled, "projector", "EVENTHUB_PROJECTOR", file.Projector.Enabled, "run the heartbeat.received → process.state projector")
	f.bool(&file.Projector.Demo, "demo", "EVENTHUB_DEMO", file.Projector.Demo, "run the projector and publish sample heartbeats, kept 3 days (a live, compacted process.state to watch)")
	f.urls(&file.Outbox.DB, "outbox-db", "OUTBOX_DB_URL", file.Outbox.DB, "run an outbox drainer on this database (postgres://… or a SQLite file)")
	a := &file.Auth
	f.secret(&a.Token, "ws-token", "WS_TOKEN", a.Token, "static token (at least 16 characters) that grants everything, for WS, HTTP and native NATS clients")
	f.secretBytes(&a.JWT.Secret, "jwt-secret", "JWT_SECRET", "HS256 secret (at least 32 bytes) of accepted JWTs")
	f.str(&a.JWT.JWKSURL, "jwt-jwks-url", "JWT_JWKS_URL", a.JWT.JWKSURL, "JWKS URL of the keys of accepted RS256/ES256/EdDSA JWTs")
	f.str(&a.JWT.Audience, "jwt-aud", "JWT_AUD", a.JWT.Audience, "required JWT audience")
	f.str(&a.JWT.Issuer, "jwt-iss", "JWT_ISS", a.JWT.Issuer, "required JWT issuer")
	f.dur(&a.JWT.Leeway, "jwt-leeway", "JWT_LEEWAY", a.JWT.Leeway, "clock leeway for exp/nbf")
	f.bool(&a.NativeScoped, "native-scoped-clients", "EVENTHUB_NATIVE_SCOPED_CLIENTS", a.NativeScoped, "put native NATS clients with scoped tokens in one shared account: faster, but see docs/nats.md before turning it on")
	f.str(&file.Log.Level, "log-level", "LOG_LEVEL", file.Log.Level, "debug, info, warn or error")
	f.str(&file.Log.Format, "log-format", "LOG_FORMAT", file.Log.Format, "text or json")
	return fs, f, &configFile
}

// withLogger returns c with the logger its log section describes.
func withLogger(c hub.Config, stderr io.Writer) (hub.Config, error) {
	log, err := newLogger(stderr, c.Log.Level, c.Log.Format)
	c.Logger = log
	return c, err
}

// configCmd prints the configuration eventhub serve would run with the same
// flags and environment, every default filled in and secrets redacted, as a
// file that -config accepts.
func configCmd(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	file, err := parseServe(args, getenv, stderr)
	if err != nil {
		return err
	}
	return file.WithDefaults().Redacted().WriteYAML(stdout)
}

func serve(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	file, err := parseServe(args, getenv, stderr)
	if err != nil {
		return err
	}
	c, err := withLogger(file, stderr)
	if err != nil {
		return err
	}
	c.Logger.Info("eventhub starting", "version", version())
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
