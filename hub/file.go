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
)

// File is the hub's configuration file (eventhub -config FILE): every
// setting of the binary, in sections. The command line's flags and their
// environment variables (named in the fields' comments) override the
// file's values. A key the file does not
// set keeps its default ([DefaultFile], then each component's own); an
// unknown key is an error naming it. deploy/hub/eventhub.example.yaml lists
// every key with its default.
type File struct {
	// NATS is the NATS server the bus runs on: the embedded one (the
	// default) or an external server or cluster.
	NATS NATSFile `yaml:"nats"`
	// Server holds the listen host and ports of the hub's HTTP, WebSocket
	// and ops servers.
	Server ServerFile `yaml:"server"`
	// Log configures the hub's logs.
	Log LogFile `yaml:"log"`
	// Auth turns authentication on for every way in (WebSocket, HTTP,
	// ops, native NATS clients). Off, everything stays on loopback.
	Auth AuthFile `yaml:"auth"`
	// The bus's settings and the topics' streams are top-level keys.
	Bus jetstream.Config `yaml:",inline"`
	// Compactors keep a compacted <source>.snapshot topic of full-history
	// topics.
	Compactors []compaction.Config `yaml:"compactors"`
	// Gateway holds the WebSocket gateway's and HTTP publish's limits.
	Gateway GatewayFile `yaml:"gateway"`
	// Ops holds the ops endpoints' and replay's limits.
	Ops OpsConfig `yaml:"ops"`
	// Outbox runs an outbox drainer inside the hub when db is set.
	Outbox OutboxFile `yaml:"outbox"`
	// Projector runs the heartbeat → process.state projector.
	Projector ProjectorFile `yaml:"projector"`
	// Limits are the rate limits and quotas (docs/production.md).
	Limits limits.Config `yaml:"limits"`
	// Metrics bounds the metrics' label cardinality.
	Metrics metrics.Config `yaml:"metrics"`
}

// NATSFile is the "nats:" section of a [File].
type NATSFile struct {
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

// ServerFile is the "server:" section of a [File].
type ServerFile struct {
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

// LogFile is the "log:" section of a [File].
type LogFile struct {
	// Level is debug, info, warn or error. $LOG_LEVEL.
	Level string `yaml:"level"`
	// Format is text or json. $LOG_FORMAT.
	Format string `yaml:"format"`
}

// AuthFile is the "auth:" section of a [File].
type AuthFile struct {
	// Token is the static token (at least 16 characters) that grants
	// everything, for WebSocket, HTTP and native NATS clients. $WS_TOKEN.
	Token string `yaml:"token"`
	// JWT verifies bearer JWTs; on when secret or jwksURL is set.
	JWT JWTFile `yaml:"jwt"`
	// NativeScopedClients puts native NATS clients whose tokens are scoped
	// to topics (no admin scope) in one shared NATS account, with rights
	// derived from their policy: the hub's account on the embedded server
	// (faster than the account of its own each gets when off), the auth
	// callout's on an external server (refused there when off). In a
	// shared account a client can write to topics it may not publish to
	// through reply subjects and read the others' replies: turn it on
	// only where every native client is trusted.
	// $EVENTHUB_NATIVE_SCOPED_CLIENTS.
	NativeScopedClients bool `yaml:"nativeScopedClients"`
}

// JWTFile is the "auth.jwt:" section of a [File].
type JWTFile struct {
	// Secret is the HS256 secret (at least 32 bytes). $JWT_SECRET.
	Secret string `yaml:"secret"`
	// JWKSURL serves the keys of RS256/ES256/EdDSA tokens. $JWT_JWKS_URL.
	JWKSURL string `yaml:"jwksURL"`
	// Audience, when set, must be in a token's aud. $JWT_AUD.
	Audience string `yaml:"audience"`
	// Issuer, when set, must be a token's iss. $JWT_ISS.
	Issuer string `yaml:"issuer"`
	// Leeway is the clock-skew allowance for exp and nbf. $JWT_LEEWAY.
	Leeway time.Duration `yaml:"leeway"`
	// Algorithms are the accepted alg values; empty: HS256 with a secret,
	// RS256, ES256 and EdDSA with a JWKS URL.
	Algorithms []string `yaml:"algorithms"`
	// JWKSRefreshInterval is how often the JWKS is fetched again.
	JWKSRefreshInterval time.Duration `yaml:"jwksRefreshInterval"`
	// JWKSTimeout bounds each JWKS fetch.
	JWKSTimeout time.Duration `yaml:"jwksTimeout"`
}

// GatewayFile is the "gateway:" section of a [File]; its keys are the
// settings of gateway.Config that a file can hold.
type GatewayFile struct {
	// AllowedOrigins are browser origins allowed besides the hub's own
	// ("*" for any). $WS_ALLOWED_ORIGINS.
	AllowedOrigins []string `yaml:"allowedOrigins"`
	// MaxFrameBytes is the largest client frame accepted; a frame over
	// four times the limit closes the connection.
	MaxFrameBytes int64 `yaml:"maxFrameBytes"`
	// MaxPayloadBytes limits the body of POST /publish.
	MaxPayloadBytes int64 `yaml:"maxPayloadBytes"`
	// MaxInflightPerSub is the most events one subscription of one
	// connection has delivered and not yet acknowledged.
	MaxInflightPerSub int `yaml:"maxInflightPerSub"`
	// GroupMaxInFlight is a whole group's window across its connections
	// (JetStream's MaxAckPending).
	GroupMaxInFlight int `yaml:"groupMaxInFlight"`
	// MaxSubscriptions is the most subscriptions one connection may hold.
	MaxSubscriptions int `yaml:"maxSubscriptions"`
	// LiveRecoveryLimit is the most events a live subscription's recovery
	// sends; past it the subscription goes on live, recovered: false.
	LiveRecoveryLimit int `yaml:"liveRecoveryLimit"`
	// LivePending is how many live events may wait for one subscription
	// while it recovers; past it the subscription fails as slow_client.
	LivePending int `yaml:"livePending"`
	// AckTimeout is a delivered event's lease when SUBSCRIBE sets no
	// ackTimeoutMs.
	AckTimeout time.Duration `yaml:"ackTimeout"`
	// MaxAckTimeout caps ackTimeoutMs and a MODACK's extend_ms.
	MaxAckTimeout time.Duration `yaml:"maxAckTimeout"`
	// WriteTimeout bounds each write to a client.
	WriteTimeout time.Duration `yaml:"writeTimeout"`
	// PingInterval is how often the gateway pings a client.
	PingInterval time.Duration `yaml:"pingInterval"`
	// IdleTimeout closes a connection silent for this long (above
	// pingInterval).
	IdleTimeout time.Duration `yaml:"idleTimeout"`
	// OutboundQueue is how many frames may wait to be written to one
	// client; a client whose queue is full is disconnected as slow.
	OutboundQueue int `yaml:"outboundQueue"`
	// AuthTimeout is how long a new connection has to authenticate.
	AuthTimeout time.Duration `yaml:"authTimeout"`
	// RequestTimeout bounds the bus calls one frame causes.
	RequestTimeout time.Duration `yaml:"requestTimeout"`
	// HandshakeTimeout bounds the WebSocket handshake.
	HandshakeTimeout time.Duration `yaml:"handshakeTimeout"`
}

// OpsConfig holds the limits of the ops endpoints and replay (the "ops:"
// section of a [File]). Zero values mean the ops package's defaults.
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

// OutboxFile is the "outbox:" section of a [File].
type OutboxFile struct {
	// DB, when set, runs an outbox drainer on this database: postgres://…
	// or a SQLite file. $OUTBOX_DB_URL.
	DB string `yaml:"db"`
	// Table is the outbox table's name.
	Table string `yaml:"table"`
	// The drainer's settings.
	Drainer outbox.Config `yaml:",inline"`
}

// ProjectorFile is the "projector:" section of a [File].
type ProjectorFile struct {
	// Enabled runs the heartbeat → process.state projector.
	// $EVENTHUB_PROJECTOR.
	Enabled bool `yaml:"enabled"`
	// Demo runs the projector and publishes sample heartbeats.
	// $EVENTHUB_DEMO.
	Demo bool `yaml:"demo"`
	// The projector's settings.
	Projector projector.Config `yaml:",inline"`
}

// DefaultFile returns the settings of the binary before any file, flag or
// environment variable: the embedded NATS server with file storage in
// ./data and its client port on 127.0.0.1:4222, and the WebSocket, HTTP and
// ops ports 8090, 8081 and 8082 on 127.0.0.1. The components' sections are
// left zero (their own defaults); [File.WithDefaults] fills them in.
func DefaultFile() File {
	return File{
		NATS:   NATSFile{DataDir: "data", Host: "127.0.0.1", Port: 4222, Sync: jetstream.SyncDefault},
		Server: ServerFile{Host: "127.0.0.1", WSPort: 8090, HTTPPort: 8081, OpsPort: 8082, ShutdownTimeout: 30 * time.Second},
		Log:    LogFile{Level: "info", Format: "text"},
		Auth:   AuthFile{JWT: JWTFile{Leeway: auth.DefaultLeeway}},
	}
}

// WithDefaults returns f with every unset setting at the value the hub will
// use: what `eventhub config` prints. Settings whose default is derived at
// run time stay unset: the streams' replicas (from the cluster's size), the
// JWT algorithms (from the keys) and the outbox's worker id (host, pid and
// a random suffix).
func (f File) WithDefaults() File {
	bus := f.Bus.WithDefaults()
	bus.Logger, bus.Observer, bus.Guard = nil, nil, nil
	f.Bus = bus
	j := &f.Auth.JWT
	if j.Leeway == 0 {
		j.Leeway = auth.DefaultLeeway
	}
	if j.JWKSRefreshInterval == 0 {
		j.JWKSRefreshInterval = auth.DefaultJWKSRefreshInterval
	}
	if j.JWKSTimeout == 0 {
		j.JWKSTimeout = auth.DefaultJWKSTimeout
	}
	f.Gateway = gatewayFile(f.Gateway.config().WithDefaults())
	o := &f.Ops
	o.RequestTimeout = or(o.RequestTimeout, ops.DefaultRequestTimeout)
	o.ReadyTimeout = or(o.ReadyTimeout, ops.DefaultReadyTimeout)
	o.FlushEvery = or(o.FlushEvery, ops.DefaultFlushEvery)
	o.ReplayBufferBytes = or(o.ReplayBufferBytes, ops.DefaultReplayBufferBytes)
	o.ReplayWriteTimeout = or(o.ReplayWriteTimeout, ops.DefaultReplayWriteTimeout)
	o.MaxConcurrentReplays = or(o.MaxConcurrentReplays, ops.DefaultMaxConcurrentReplays)
	f.Outbox.Table = or(f.Outbox.Table, outbox.DefaultTable)
	worker := f.Outbox.Drainer.WorkerID
	f.Outbox.Drainer = f.Outbox.Drainer.WithDefaults()
	f.Outbox.Drainer.WorkerID, f.Outbox.Drainer.Logger = worker, nil
	p := &f.Projector.Projector
	p.Heartbeats = or(p.Heartbeats, projector.DefaultHeartbeats)
	p.States = or(p.States, projector.DefaultStates)
	p.Group = or(p.Group, projector.DefaultGroup)
	p.StaleAfter = or(p.StaleAfter, projector.DefaultStaleAfter)
	p.CheckEvery = or(p.CheckEvery, projector.DefaultCheckEvery)
	p.MinInterval = or(p.MinInterval, projector.DefaultMinInterval)
	f.Limits.MaxTracked = or(f.Limits.MaxTracked, limits.DefaultMaxTracked)
	f.Metrics = f.Metrics.WithDefaults()
	return f
}

// or returns v, or def when v is zero.
func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func (g GatewayFile) config() gateway.Config {
	return gateway.Config{
		AllowedOrigins:    g.AllowedOrigins,
		MaxFrameBytes:     g.MaxFrameBytes,
		MaxPayloadBytes:   g.MaxPayloadBytes,
		MaxInflightPerSub: g.MaxInflightPerSub,
		GroupMaxInFlight:  g.GroupMaxInFlight,
		MaxSubscriptions:  g.MaxSubscriptions,
		LiveRecoveryLimit: g.LiveRecoveryLimit,
		LivePending:       g.LivePending,
		AckTimeout:        g.AckTimeout,
		MaxAckTimeout:     g.MaxAckTimeout,
		WriteTimeout:      g.WriteTimeout,
		PingInterval:      g.PingInterval,
		IdleTimeout:       g.IdleTimeout,
		OutboundQueue:     g.OutboundQueue,
		AuthTimeout:       g.AuthTimeout,
		RequestTimeout:    g.RequestTimeout,
		HandshakeTimeout:  g.HandshakeTimeout,
	}
}

func gatewayFile(c gateway.Config) GatewayFile {
	return GatewayFile{
		AllowedOrigins:    c.AllowedOrigins,
		MaxFrameBytes:     c.MaxFrameBytes,
		MaxPayloadBytes:   c.MaxPayloadBytes,
		MaxInflightPerSub: c.MaxInflightPerSub,
		GroupMaxInFlight:  c.GroupMaxInFlight,
		MaxSubscriptions:  c.MaxSubscriptions,
		LiveRecoveryLimit: c.LiveRecoveryLimit,
		LivePending:       c.LivePending,
		AckTimeout:        c.AckTimeout,
		MaxAckTimeout:     c.MaxAckTimeout,
		WriteTimeout:      c.WriteTimeout,
		PingInterval:      c.PingInterval,
		IdleTimeout:       c.IdleTimeout,
		OutboundQueue:     c.OutboundQueue,
		AuthTimeout:       c.AuthTimeout,
		RequestTimeout:    c.RequestTimeout,
		HandshakeTimeout:  c.HandshakeTimeout,
	}
}

// Config returns the hub configuration f describes. The logger is left
// for the caller to set.
func (f File) Config() Config {
	j := f.Auth.JWT
	var secret []byte
	if j.Secret != "" {
		secret = []byte(j.Secret)
	}
	return Config{
		NATSURL:         f.NATS.URL,
		NATSCreds:       f.NATS.Creds,
		NATSUser:        f.NATS.User,
		NATSPassword:    f.NATS.Password,
		NATSToken:       f.NATS.Token,
		NATSCalloutSeed: f.NATS.CalloutSeed,
		DataDir:         f.NATS.DataDir,
		Memory:          f.NATS.Memory,
		NATSHost:        f.NATS.Host,
		NATSPort:        f.NATS.Port,
		Sync:            f.NATS.Sync,
		Bus:             f.Bus,
		Auth: auth.Config{Token: f.Auth.Token, JWT: auth.VerifierConfig{
			Secret: secret, JWKSURL: j.JWKSURL, Audience: j.Audience, Issuer: j.Issuer, Leeway: j.Leeway,
			Algorithms: j.Algorithms, JWKSRefreshInterval: j.JWKSRefreshInterval, JWKSTimeout: j.JWKSTimeout,
		}, NativeScoped: f.Auth.NativeScopedClients},
		Host:            f.Server.Host,
		AllowedHosts:    f.Server.AllowedHosts,
		OpsPort:         f.Server.OpsPort,
		WSPort:          f.Server.WSPort,
		HTTPPort:        f.Server.HTTPPort,
		ShutdownTimeout: f.Server.ShutdownTimeout,
		Gateway:         f.Gateway.config(),
		Ops:             f.Ops,
		Compactors:      f.Compactors,
		Projector:       f.Projector.Enabled,
		Demo:            f.Projector.Demo,
		ProjectorConfig: f.Projector.Projector,
		OutboxURL:       f.Outbox.DB,
		OutboxTable:     f.Outbox.Table,
		Outbox:          f.Outbox.Drainer,
		Limits:          f.Limits,
		Metrics:         f.Metrics,
	}
}

// Validate reports the settings of f that the hub would refuse, as
// [Config.Validate] does, plus a log level or format it does not know.
func (f File) Validate() error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(f.Log.Level)); err != nil {
		return fmt.Errorf("log level %q (-log-level, $LOG_LEVEL, log.level): want debug, info, warn or error", f.Log.Level)
	}
	if f.Log.Format != "text" && f.Log.Format != "json" {
		return fmt.Errorf("log format %q (-log-format, $LOG_FORMAT, log.format): want text or json", f.Log.Format)
	}
	switch f.NATS.Sync {
	case "", jetstream.SyncDefault, jetstream.SyncAlways:
	default:
		return fmt.Errorf("sync %q (-sync, $EVENTHUB_SYNC, nats.sync): want %q or %q", f.NATS.Sync, jetstream.SyncDefault, jetstream.SyncAlways)
	}
	return f.Config().Validate()
}

// LoadFile reads a configuration file over [DefaultFile] and validates it.
// An unknown key is an error naming it (with its section and line). Keys
// the file leaves out keep their defaults.
func LoadFile(path string) (File, error) {
	f := DefaultFile()
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

func decodeFile(b []byte, f *File) error {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return err
	}
	if len(root.Content) == 0 {
		return nil // empty file
	}
	if err := checkKeys(root.Content[0], typeOf[File](), ""); err != nil {
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

// Redacted returns f with its secrets replaced by "REDACTED": the static
// token, the JWT secret, the NATS password, token and callout seed, and
// the passwords in the NATS and outbox URLs.
func (f File) Redacted() File {
	for _, s := range []*string{&f.Auth.Token, &f.Auth.JWT.Secret, &f.NATS.Password, &f.NATS.Token, &f.NATS.CalloutSeed} {
		if *s != "" {
			*s = redacted
		}
	}
	f.NATS.URL = RedactURLs(f.NATS.URL)
	f.Outbox.DB = RedactURLs(f.Outbox.DB)
	return f
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

// WriteYAML writes f as a configuration file that [LoadFile] reads back
// (durations as "5s", every key). It writes secrets as they are: write
// [File.Redacted] to show a configuration.
func (f File) WriteYAML(w io.Writer) error {
	var b bytes.Buffer
	enc := yamlWriter{b: &b}
	enc.fields(valueOf(f), 0)
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
