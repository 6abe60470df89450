package jetstream

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Durability modes of the embedded server.
const (
	// SyncDefault is NATS's default: a publish is acknowledged once JetStream
	// has it in memory and the operating system's page cache, and it is
	// flushed to disk every two minutes. Events survive a killed or crashed
	// hub process; a power cut or kernel crash can lose the last interval.
	SyncDefault = "default"
	// SyncAlways flushes every write to disk before it is acknowledged:
	// events survive power loss, at a large cost in publish throughput.
	SyncAlways = "always"
)

// ServerConfig configures the embedded nats-server.
type ServerConfig struct {
	// DataDir holds JetStream's file storage (default "./data").
	DataDir string
	// Memory keeps everything in memory: nothing survives a restart.
	Memory bool
	// Host and Port of the NATS client listener, for existing NATS clients
	// (defaults 127.0.0.1 and 4222; Port -1 disables the listener, 0 picks a
	// free port).
	Host string
	Port int
	// Sync is SyncDefault or SyncAlways.
	Sync string
	// MaxPayload is the largest message in bytes (default 1 MiB).
	MaxPayload int32
	// ServerName names the server (default "eventhub").
	ServerName string
	// Options, when set, is used as the base of the server's options
	// (authentication, TLS, clustering); the fields above override it.
	Options *server.Options
	// Logger receives the server's log lines; nil discards them.
	Logger *slog.Logger
}

// ErrServerNotReady is returned when the embedded server does not become
// ready in time.
var ErrServerNotReady = errors.New("jetstream: embedded nats-server not ready")

// StartServer starts an embedded nats-server with JetStream. The caller owns
// it: call Shutdown and WaitForShutdown.
func StartServer(cfg ServerConfig) (*server.Server, error) {
	opts := &server.Options{}
	if cfg.Options != nil {
		o := *cfg.Options
		opts = &o
	}
	opts.JetStream = true
	opts.NoSigs = true
	opts.ServerName = cfg.ServerName
	if opts.ServerName == "" {
		opts.ServerName = "eventhub"
	}
	opts.Host = cfg.Host
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	opts.Port = cfg.Port
	switch cfg.Port {
	case 0:
		opts.Port = server.RANDOM_PORT
	case -1:
		opts.DontListen = true
	}
	if cfg.MaxPayload > 0 {
		opts.MaxPayload = cfg.MaxPayload
	}
	if cfg.Memory {
		opts.JetStreamMaxStore = 0
		dir, err := os.MkdirTemp("", "eventhub-mem-")
		if err != nil {
			return nil, fmt.Errorf("jetstream: temp dir: %w", err)
		}
		opts.StoreDir = dir
	} else {
		dir := cfg.DataDir
		if dir == "" {
			dir = "data"
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("jetstream: data dir: %w", err)
		}
		opts.StoreDir = abs
	}
	switch cfg.Sync {
	case "", SyncDefault:
	case SyncAlways:
		opts.SyncAlways = true
	default:
		return nil, fmt.Errorf("jetstream: sync %q: want %q or %q", cfg.Sync, SyncDefault, SyncAlways)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("jetstream: new server: %w", err)
	}
	if cfg.Logger != nil {
		srv.SetLoggerV2(&slogAdapter{l: cfg.Logger}, false, false, false)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, ErrServerNotReady
	}
	return srv, nil
}

// slogAdapter writes nats-server's log lines to a slog.Logger (which the
// caller labels, e.g. with a component attribute).
type slogAdapter struct{ l *slog.Logger }

// Noticef logs at debug: the server's notices (its banner, its listeners)
// are details; the hub logs what an operator needs at info.
func (a *slogAdapter) Noticef(format string, v ...any) {
	a.l.Debug(fmt.Sprintf(format, v...))
}
func (a *slogAdapter) Warnf(format string, v ...any) {
	a.l.Warn(fmt.Sprintf(format, v...))
}
func (a *slogAdapter) Fatalf(format string, v ...any) {
	a.l.Error(fmt.Sprintf(format, v...))
}
func (a *slogAdapter) Errorf(format string, v ...any) {
	a.l.Error(fmt.Sprintf(format, v...))
}
func (a *slogAdapter) Debugf(format string, v ...any) {
	a.l.Debug(fmt.Sprintf(format, v...))
}
func (a *slogAdapter) Tracef(format string, v ...any) {}
