package jetstream

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
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

// Errors of starting the embedded server, each with its cause.
var (
	// ErrServerNotReady: the embedded server did not become ready in time;
	// the error carries the last error the server logged.
	ErrServerNotReady = errors.New("jetstream: embedded nats-server not ready")
	// ErrDataDirInUse: another process holds the data directory.
	ErrDataDirInUse = errors.New("jetstream: data directory in use")
	// ErrDataDir: the data directory cannot be created or written.
	ErrDataDir = errors.New("jetstream: data directory not usable")
	// ErrPortInUse: the NATS client port is taken (often by a local
	// nats-server).
	ErrPortInUse = errors.New("jetstream: NATS client port in use")
	// ErrBadServerConfig: settings that contradict each other.
	ErrBadServerConfig = errors.New("jetstream: invalid embedded server settings")
)

// StartServer starts an embedded nats-server with JetStream. The caller owns
// it: call Shutdown and WaitForShutdown. With file storage it locks the
// data directory until the server has shut down, so a second hub (or an
// export) on the same directory is refused with ErrDataDirInUse instead of
// corrupting the store. A taken port, an unusable directory and
// contradictory settings are refused at once, with their cause.
func StartServer(cfg ServerConfig) (*server.Server, error) {
	srv, lock, err := startServer(cfg)
	if err != nil {
		return nil, err
	}
	if lock != nil {
		// The lock is the server's: released once it has shut down.
		go func() {
			srv.WaitForShutdown()
			lock.Close()
		}()
	}
	return srv, nil
}

// startServer is StartServer that hands the data directory's lock (nil for
// memory storage) to the caller, to close after the server's shutdown.
func startServer(cfg ServerConfig) (*server.Server, *os.File, error) {
	if cfg.Memory && cfg.Sync == SyncAlways {
		return nil, nil, fmt.Errorf("%w: sync %q flushes file storage to disk, and memory storage has none: drop one of them", ErrBadServerConfig, SyncAlways)
	}
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
			return nil, nil, fmt.Errorf("jetstream: temp dir: %w", err)
		}
		opts.StoreDir = dir
	} else {
		dir := cfg.DataDir
		if dir == "" {
			dir = "data"
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrDataDir, err)
		}
		opts.StoreDir = abs
	}
	switch cfg.Sync {
	case "", SyncDefault:
	case SyncAlways:
		opts.SyncAlways = true
	default:
		return nil, nil, fmt.Errorf("jetstream: sync %q: want %q or %q", cfg.Sync, SyncDefault, SyncAlways)
	}
	if !opts.DontListen && opts.Port > 0 {
		addr := net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %w (is a nats-server already running? choose another port, or -1 for none)", ErrPortInUse, addr, err)
		}
		ln.Close()
	}
	var lock *os.File
	if !cfg.Memory {
		var err error
		if lock, err = lockDataDir(opts.StoreDir); err != nil {
			return nil, nil, err
		}
	}
	unlock := func() {
		if lock != nil {
			lock.Close()
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		unlock()
		return nil, nil, fmt.Errorf("jetstream: new server: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	la := &slogAdapter{l: logger}
	srv.SetLoggerV2(la, false, false, false)
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		unlock()
		if cause := la.lastError(); cause != "" {
			return nil, nil, fmt.Errorf("%w: %s", ErrServerNotReady, cause)
		}
		return nil, nil, ErrServerNotReady
	}
	return srv, lock, nil
}

// slogAdapter writes nats-server's log lines to a slog.Logger (which the
// caller labels, e.g. with a component attribute), and keeps the last error
// line to explain a server that does not start.
type slogAdapter struct {
	l    *slog.Logger
	mu   sync.Mutex
	last string
}

func (a *slogAdapter) keep(msg string) {
	a.mu.Lock()
	a.last = msg
	a.mu.Unlock()
}

func (a *slogAdapter) lastError() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

// Noticef logs at debug: the server's notices (its banner, its listeners)
// are details; the hub logs what an operator needs at info.
func (a *slogAdapter) Noticef(format string, v ...any) {
	a.l.Debug(fmt.Sprintf(format, v...))
}
func (a *slogAdapter) Warnf(format string, v ...any) {
	a.l.Warn(fmt.Sprintf(format, v...))
}
func (a *slogAdapter) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	a.keep(msg)
	a.l.Error(msg)
}
func (a *slogAdapter) Errorf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	a.keep(msg)
	a.l.Error(msg)
}
func (a *slogAdapter) Debugf(format string, v ...any) {
	a.l.Debug(fmt.Sprintf(format, v...))
}
func (a *slogAdapter) Tracef(format string, v ...any) {}
