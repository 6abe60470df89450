package hub

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.yaml.in/yaml/v3"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/compaction"
	"github.com/eventhub/eventhub/gateway"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/limits"
	"github.com/eventhub/eventhub/metrics"
	"github.com/eventhub/eventhub/ops"
	"github.com/eventhub/eventhub/outbox"
	"github.com/eventhub/eventhub/projector"
	"github.com/eventhub/eventhub/tracing"
)

// Config is the hub's configuration: every setting of the binary, in the
// sections of its configuration file (eventhub -config FILE). The command
// line's flags and their environment variables (named in the fields'
// comments) override the file's values. A key the file does not set keeps
// its default ([DefaultConfig], then each component's own); an unknown key
// is an error naming it. deploy/hub/eventhub.example.yaml lists every key
// with its default.
//
// The zero value runs an embedded NATS server with file storage in ./data,
// its client port and the hub's servers on free ports of 127.0.0.1.
type Config struct {
	// NATS is the NATS server the bus runs on: the embedded one (the
	// default) or an external server or cluster.
	NATS NATSConfig `yaml:"nats"`
	// Server holds the listen host and ports of the hub's HTTP, WebSocket
	// and ops servers.
	Server ServerConfig `yaml:"server"`
	// Log configures the hub's logs.
	Log LogConfig `yaml:"log"`
	// Auth turns authentication on for every way in (WebSocket, HTTP,
	// ops, native NATS clients). Off, everything stays on loopback.
	// $WS_TOKEN, $JWT_SECRET, $JWT_JWKS_URL, $JWT_AUD, $JWT_ISS,
	// $JWT_LEEWAY, $EVENTHUB_NATIVE_SCOPED_CLIENTS.
	Auth auth.Config `yaml:"auth"`
	// The bus's settings and the topics' streams are top-level keys.
	Bus jetstream.Config `yaml:",inline"`
	// Compactors keep a compacted <source>.snapshot topic of full-history
	// topics.
	Compactors []compaction.Config `yaml:"compactors"`
	// Gateway holds the WebSocket gateway's and HTTP publish's limits
	// (allowedOrigins: $WS_ALLOWED_ORIGINS); its authentication comes from
	// auth.
	Gateway gateway.Config `yaml:"gateway"`
	// Ops holds the ops endpoints' and replay's limits.
	Ops OpsConfig `yaml:"ops"`
	// Outbox runs an outbox drainer inside the hub when db is set.
	Outbox OutboxConfig `yaml:"outbox"`
	// Projector runs the heartbeat → process.state projector.
	Projector ProjectorConfig `yaml:"projector"`
	// Limits are the rate limits and quotas (docs/production.md).
	Limits limits.Config `yaml:"limits"`
	// Metrics bounds the metrics' label cardinality.
	Metrics metrics.Config `yaml:"metrics"`
	// Tracing exports OpenTelemetry traces of publishes and deliveries
	// (docs/tracing.md); off unless configured here or by OTEL_*
	// environment variables.
	Tracing tracing.Config `yaml:"tracing"`
	// Logger receives the hub's logs; nil discards them.
	Logger *slog.Logger `yaml:"-"`
	// TracerProvider, if set, is used instead of the one Tracing would
	// build; the hub does not shut it down.
	TracerProvider trace.TracerProvider `yaml:"-"`
}

// NATSConfig is the "nats:" section of a [Config].
type NATSConfig struct {
	// URL is an external NATS server or cluster (comma-separated URLs);
	// empty runs the embedded server. $NATS_URL.
	URL string `yaml:"url"`
	// Creds is a credentials file for the external server. $NATS_CREDS.
	Creds string `yaml:"creds"`
	// User and Password authenticate to the external server. $NATS_USER,
	// $NATS_PASSWORD.
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// Token authenticates to the external server. $NATS_TOKEN.
	Token string `yaml:"token"`
	// CalloutSeed is the account nkey seed (SA…) with which the hub
	// answers the external server's auth callout (deploy/nats/callout.conf).
	// $NATS_CALLOUT_SEED.
	CalloutSeed string `yaml:"calloutSeed"`
	// DataDir is the embedded server's JetStream storage directory.
	// $EVENTHUB_DATA_DIR.
	DataDir string `yaml:"dataDir"`
	// Memory keeps everything in memory (throwaway runs). $EVENTHUB_MEMORY.
	Memory bool `yaml:"memory"`
	// Host and Port are the embedded server's NATS client port for
	// existing NATS clients (port -1: none). $EVENTHUB_NATS_HOST,
	// $EVENTHUB_NATS_PORT.
	Host string `yaml:"host"`
	Port int    `yaml:"port"`
	// Sync is the embedded server's durability: "default" (acknowledged
	// before fsync) or "always" (fsync every write). $EVENTHUB_SYNC.
	Sync string `yaml:"sync"`
}

// ServerConfig is the "server:" section of a [Config].
type ServerConfig struct {
	// Host is the listen host of the WebSocket, HTTP and ops servers;
	// beyond loopback it needs auth. $EVENTHUB_HOST.
	Host string `yaml:"host"`
	// AllowedHosts are host names served without auth besides loopback
	// and localhost (DNS-rebinding guard). $EVENTHUB_ALLOWED_HOSTS.
	AllowedHosts []string `yaml:"allowedHosts"`
	// WSPort serves the WebSocket gateway on / and /ws (-1: none).
	// $WS_PORT.
	WSPort int `yaml:"wsPort"`
	// HTTPPort serves POST /publish/{topic}, /ws, /ops/ and the dashboard
	// (-1: none). $HTTP_PORT.
	HTTPPort int `yaml:"httpPort"`
	// OpsPort serves /metrics, /healthz, /readyz and the ops endpoints
	// (-1: none). $OPS_PORT.
	OpsPort int `yaml:"opsPort"`
	// ShutdownTimeout bounds a graceful shutdown.
	ShutdownTimeout time.Duration `yaml:"shutdownTimeout"`
}

// LogConfig is the "log:" section of a [Config].
type LogConfig struct {
	// Level is debug, info, warn or error. $LOG_LEVEL.
	Level string `yaml:"level"`
	// Format is text or json. $LOG_FORMAT.
	Format string `yaml:"format"`
}

// OpsConfig holds the limits of the ops endpoints and replay (the "ops:"
// section of a [Config]). Zero values mean the ops package's defaults.
type OpsConfig struct {
	// RequestTimeout bounds the JetStream requests of one ops call and
	// the position lookups of a replay.
	RequestTimeout time.Duration `yaml:"requestTimeout"`
	// ReadyTimeout is how long /readyz waits for JetStream.
	ReadyTimeout time.Duration `yaml:"readyTimeout"`
	// FlushEvery is how many NDJSON lines a replay writes between flushes.
	FlushEvery int `yaml:"flushEvery"`
	// ReplayBufferBytes is about how many bytes of messages a replay's
	// consumer buffers.
	ReplayBufferBytes int `yaml:"replayBufferBytes"`
	// ReplayWriteTimeout is the write deadline of each flush of a replay.
	ReplayWriteTimeout time.Duration `yaml:"replayWriteTimeout"`
	// MaxConcurrentReplays limits replays running at once; more are
	// refused with 429.
	MaxConcurrentReplays int `yaml:"maxConcurrentReplays"`
}

// OutboxConfig is the "outbox:" section of a [Config].
type OutboxConfig struct {
	// DB, when set, runs an outbox drainer on this database: postgres://…
	// or a SQLite file. $OUTBOX_DB_URL.
	DB string `yaml:"db"`
	// Table is the outbox table's name.
	Table string `yaml:"table"`
	// The drainer's settings.
	Drainer outbox.Config `yaml:",inline"`
}

// ProjectorConfig is the "projector:" section of a [Config].
type ProjectorConfig struct {
	// Enabled runs the heartbeat → process.state projector.
	// $EVENTHUB_PROJECTOR.
	Enabled bool `yaml:"enabled"`
	// Demo runs the projector and publishes sample heartbeats.
	// $EVENTHUB_DEMO.
	Demo bool `yaml:"demo"`
	// The projector's settings.
	Projector projector.Config `yaml:",inline"`
}

// DefaultConfig returns the settings of the binary before any file, flag or
// environment variable: the embedded NATS server with file storage in
// ./data and its client port on 127.0.0.1:4222, and the WebSocket, HTTP and
// ops ports 8090, 8081 and 8082 on 127.0.0.1. The components' sections are
// left zero (their own defaults); [Config.WithDefaults] fills them in.
func DefaultConfig() Config {
	return Config{
		NATS:   NATSConfig{DataDir: "data", Host: "127.0.0.1", Port: 4222, Sync: jetstream.SyncDefault},
		Server: ServerConfig{Host: "127.0.0.1", WSPort: 8090, HTTPPort: 8081, OpsPort: 8082, ShutdownTimeout: 30 * time.Second},
		Log:    LogConfig{Level: "info", Format: "text"},
		Auth:   auth.Config{JWT: auth.VerifierConfig{Leeway: auth.DefaultLeeway}},
	}
}

// WithDefaults returns c with every unset setting at the value the hub will
// use: what `eventhub config` prints. Settings whose default is derived at
// run time stay unset: the streams' replicas (from the cluster's size), the
// JWT algorithms (from the keys) and the outbox's worker id (host, pid and
// a random suffix).
func (c Config) WithDefaults() Config {
	c = c.withDefaults()
	c.Bus = c.Bus.WithDefaults()
	j := &c.Auth.JWT
	j.Leeway = or(j.Leeway, auth.DefaultLeeway)
	j.JWKSRefreshInterval = or(j.JWKSRefreshInterval, auth.DefaultJWKSRefreshInterval)
	j.JWKSTimeout = or(j.JWKSTimeout, auth.DefaultJWKSTimeout)
	c.Gateway = c.Gateway.WithDefaults()
	o := &c.Ops
	o.RequestTimeout = or(o.RequestTimeout, ops.DefaultRequestTimeout)
	o.ReadyTimeout = or(o.ReadyTimeout, ops.DefaultReadyTimeout)
	o.FlushEvery = or(o.FlushEvery, ops.DefaultFlushEvery)
	o.ReplayBufferBytes = or(o.ReplayBufferBytes, ops.DefaultReplayBufferBytes)
	o.ReplayWriteTimeout = or(o.ReplayWriteTimeout, ops.DefaultReplayWriteTimeout)
	o.MaxConcurrentReplays = or(o.MaxConcurrentReplays, ops.DefaultMaxConcurrentReplays)
	c.Outbox.Table = or(c.Outbox.Table, outbox.DefaultTable)
	worker := c.Outbox.Drainer.WorkerID
	c.Outbox.Drainer = c.Outbox.Drainer.WithDefaults()
	c.Outbox.Drainer.WorkerID = worker
	p := &c.Projector.Projector
	p.Heartbeats = or(p.Heartbeats, projector.DefaultHeartbeats)
	p.States = or(p.States, projector.DefaultStates)
	p.Group = or(p.Group, projector.DefaultGroup)
	p.StaleAfter = or(p.StaleAfter, projector.DefaultStaleAfter)
	p.CheckEvery = or(p.CheckEvery, projector.DefaultCheckEvery)
	p.MinInterval = or(p.MinInterval, projector.DefaultMinInterval)
	c.Limits.MaxTracked = or(c.Limits.MaxTracked, limits.DefaultMaxTracked)
	c.Metrics = c.Metrics.WithDefaults()
	return c
}

// or returns v, or def when v is zero.
func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// LoadFile reads a configuration file over [DefaultConfig] and validates
// it. An unknown key is an error naming it (with its section and line).
// Keys the file leaves out keep their defaults.
func LoadFile(path string) (Config, error) {
	f := DefaultConfig()
	b, err := os.ReadFile(path)
	if err != nil {
		return f, fmt.Errorf("read config: %w", err)
	}
	if err := decodeFile(b, &f); err != nil {
		return f, fmt.Errorf("config %s: %w", path, err)
	}
	if err := f.Validate(); err != nil {
		return f, fmt.Errorf("config %s: %w", path, err)
	}
	return f, nil
}

//go:generate go test . -run TestExampleConfigIsGenerated -update

// ErrUnknownKey is wrapped by the error of a configuration file with a key
// the hub does not know.
var ErrUnknownKey = errors.New("unknown key")

func decodeFile(b []byte, f *Config) error {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return err
	}
	if len(root.Content) == 0 {
		return nil // empty file
	}
	if err := checkKeys(root.Content[0], typeOf[Config](), ""); err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(f); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

const redacted = "REDACTED"

// Redacted returns c with its secrets replaced by "REDACTED": the static
// token, the JWT secret, the NATS password, token and callout seed, and
// the passwords in the NATS, outbox and tracing endpoint URLs.
func (c Config) Redacted() Config {
	for _, s := range []*string{&c.Auth.Token, &c.NATS.Password, &c.NATS.Token, &c.NATS.CalloutSeed} {
		if *s != "" {
			*s = redacted
		}
	}
	if len(c.Auth.JWT.Secret) > 0 {
		c.Auth.JWT.Secret = auth.Secret(redacted)
	}
	c.NATS.URL = RedactURLs(c.NATS.URL)
	c.Outbox.DB = RedactURLs(c.Outbox.DB)
	c.Tracing.Endpoint = RedactURLs(c.Tracing.Endpoint)
	return c
}

// RedactURLs replaces the passwords of comma-separated URLs, in the user
// info or in a password query parameter. Anything that is not a URL with a
// password (a file path) is kept.
func RedactURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil {
			parts[i] = redacted // unparsable: it may hold anything
			continue
		}
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), redacted)
		}
		if q := u.Query(); q.Has("password") {
			q.Set("password", redacted)
			u.RawQuery = q.Encode()
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// WriteYAML writes c as a configuration file that [LoadFile] reads back
// (durations as "5s", every key). It writes secrets as they are: write
// [Config.Redacted] to show a configuration.
func (c Config) WriteYAML(w io.Writer) error {
	var b bytes.Buffer
	enc := yamlWriter{b: &b}
	enc.fields(valueOf(c), 0)
	_, err := w.Write(b.Bytes())
	return err
}

func (o OpsConfig) validate() error {
	if o.RequestTimeout < 0 || o.ReadyTimeout < 0 || o.FlushEvery < 0 || o.ReplayBufferBytes < 0 ||
		o.ReplayWriteTimeout < 0 || o.MaxConcurrentReplays < 0 {
		return errors.New("ops: negative limit (0 is the default)")
	}
	return nil
}
