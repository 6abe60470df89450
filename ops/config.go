package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// Defaults of [Config], applied in one place ([Config.withDefaults]).
const (
	DefaultRequestTimeout       = 10 * time.Second
	DefaultReadyTimeout         = 2 * time.Second
	DefaultFlushEvery           = 1000
	DefaultReplayBufferBytes    = 2 << 20
	DefaultReplayWriteTimeout   = 30 * time.Second
	DefaultMaxConcurrentReplays = 4
)

// Config configures a [Handler]. Only Bus is required; every other zero
// value means its default.
type Config struct {
	// Bus is the event bus whose state the endpoints report, usually the
	// admin handle of a *jetstream.Bus (bus.Admin()). Required. The
	// Handler never closes it.
	Bus Status
	// Topics, Events, Groups, Keys and Export are the roles the endpoints
	// use; each one left nil is Bus, which must then implement it.
	Topics Topics
	Events Events
	Groups Groups
	Keys   Keys
	Export ExportSource
	// Durability describes the durability the hub runs with; /readyz
	// reports it as it is (e.g. "default: acknowledged before fsync").
	Durability string
	// Authorize, when set, is called for every request except the probes
	// (/healthz, /readyz; see AuthorizeProbes) before it is handled. A
	// non-nil error refuses the request: 403 when the error is, or wraps, a
	// *facade.Error with code "forbidden", else 401 with
	// "WWW-Authenticate: Bearer". Nil means no authentication: listen on
	// loopback only.
	Authorize func(r *http.Request) error
	// Visible, when set, returns which topics the caller of r may see:
	// /topics lists only those (and their groups), and leaves out streams
	// with none. Nil: every topic is visible.
	Visible func(r *http.Request) func(topic string) bool
	// AuthorizeAdmin, when set, is called for every request to the admin
	// API (/admin/...) and returns the principal the audit log names; an
	// error refuses the request (403 when it wraps ErrForbidden, else
	// 401). Nil: with Authorize nil too, the admin API answers everyone
	// as "anonymous" (listen on loopback only); with Authorize set, every
	// admin request is refused with 403.
	AuthorizeAdmin func(r *http.Request) (principal string, err error)
	// BindPrincipal, when set, returns the context an admin request runs
	// in, given its principal (as AuthorizeAdmin returned it, or
	// "anonymous"): the hub binds the principal whose topic quota a topic
	// the request creates counts against.
	BindPrincipal func(ctx context.Context, principal string) context.Context
	// Sessions lists and disconnects WebSocket sessions for the admin
	// API (the hub's gateway); nil lists none.
	Sessions SessionDirectory
	// AuthorizeProbes makes /healthz and /readyz go through Authorize too.
	AuthorizeProbes bool
	// RequestTimeout bounds the JetStream requests of one call to the
	// JSON endpoints, and the position lookups of a replay (default 10s).
	RequestTimeout time.Duration
	// ReadyTimeout is how long /readyz waits for JetStream (default 2s).
	ReadyTimeout time.Duration
	// FlushEvery is how many NDJSON lines a replay writes between flushes
	// (default 1000). The end of a replay is always flushed.
	FlushEvery int
	// ReplayBufferBytes is about how many bytes of messages a replay's
	// consumer buffers (default 2 MiB): that many bytes' worth of messages
	// of the stream's average size, at least 16 and at most 1000 messages.
	// With the line buffer it bounds a replay's memory.
	ReplayBufferBytes int
	// ReplayWriteTimeout is the write deadline of each flush of a replay
	// (default 30s): a client that stops reading is dropped, while a long
	// replay is not cut by the server's WriteTimeout.
	ReplayWriteTimeout time.Duration
	// MaxConcurrentReplays limits replays running at once (default 4);
	// more are refused with 429.
	MaxConcurrentReplays int
	// Now is the clock of lag figures (default time.Now).
	Now func() time.Time
	// Logger receives the handler's logs; nil discards them.
	Logger *slog.Logger
}

// ErrNoBus is returned by [Config.Validate] when Config.Bus is nil.
var ErrNoBus = errors.New("ops: Config.Bus is required")

// Validate reports the first invalid setting.
func (c Config) Validate() error {
	if c.Bus == nil {
		return ErrNoBus
	}
	if _, err := c.withRoles(); err != nil {
		return err
	}
	if c.RequestTimeout < 0 || c.ReadyTimeout < 0 || c.ReplayWriteTimeout < 0 {
		return errors.New("ops: negative timeout")
	}
	if c.FlushEvery < 0 || c.ReplayBufferBytes < 0 || c.MaxConcurrentReplays < 0 {
		return errors.New("ops: negative FlushEvery, ReplayBufferBytes or MaxConcurrentReplays")
	}
	return nil
}

func (c Config) withDefaults() Config {
	c, _ = c.withRoles() // Validate has checked them
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.FlushEvery == 0 {
		c.FlushEvery = DefaultFlushEvery
	}
	if c.ReplayBufferBytes == 0 {
		c.ReplayBufferBytes = DefaultReplayBufferBytes
	}
	if c.ReplayWriteTimeout == 0 {
		c.ReplayWriteTimeout = DefaultReplayWriteTimeout
	}
	if c.MaxConcurrentReplays == 0 {
		c.MaxConcurrentReplays = DefaultMaxConcurrentReplays
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// ErrMissingRole is returned by [Config.Validate] when a role of Config is
// nil and Config.Bus does not implement it.
var ErrMissingRole = errors.New("ops: a role is nil and Config.Bus does not implement it")

// withRoles returns c with each nil role set to c.Bus.
func (c Config) withRoles() (Config, error) {
	var err error
	role(&c.Topics, c.Bus, "Topics", &err)
	role(&c.Events, c.Bus, "Events", &err)
	role(&c.Groups, c.Bus, "Groups", &err)
	role(&c.Keys, c.Bus, "Keys", &err)
	role(&c.Export, c.Bus, "Export", &err)
	return c, err
}

// role sets *r to bus when *r is nil and bus implements R; it records in
// *err the first role left unset.
func role[R comparable](r *R, bus Status, name string, err *error) {
	var zero R
	if *r != zero {
		return
	}
	if v, ok := bus.(R); ok {
		*r = v
	} else if *err == nil {
		*err = fmt.Errorf("%w: Config.%s", ErrMissingRole, name)
	}
}
