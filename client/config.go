package client

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// Defaults of [Config], applied in one place ([Config.withDefaults]).
const (
	DefaultRequestTimeout   = 10 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultWriteTimeout     = 10 * time.Second
	DefaultIdleTimeout      = 75 * time.Second
	DefaultReconnectMin     = 100 * time.Millisecond
	DefaultReconnectMax     = 5 * time.Second
	DefaultOutboundQueue    = 4096
)

// Config configures a [Client]. The zero value is valid.
type Config struct {
	// Token is sent in the AUTH frame. Never logged.
	Token string
	// Header is added to the WebSocket handshake (an Origin, say).
	Header http.Header
	// RequestTimeout bounds calls whose ctx has no deadline, including the
	// wait for a connection while reconnecting (default 10s).
	RequestTimeout time.Duration
	// HandshakeTimeout bounds the WebSocket handshake (default 10s).
	HandshakeTimeout time.Duration
	// WriteTimeout bounds each write to the gateway (default 10s).
	WriteTimeout time.Duration
	// IdleTimeout drops a connection on which nothing, not even a ping,
	// arrived for this long, or up to a sixteenth longer (default 75s:
	// three of the gateway's pings).
	IdleTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the reconnect backoff (defaults
	// 100ms and 5s; the delay doubles, with jitter).
	ReconnectMin time.Duration
	ReconnectMax time.Duration
	// NoReconnect: when the connection drops, the client fails every call
	// with an error wrapping facade.ErrUnavailable instead of reconnecting.
	NoReconnect bool
	// OnLiveGap, if set, is called when a live subscription ([Client.Follow])
	// resumed after a reconnect but the stream no longer holds every
	// event after the last one it saw (retention or compaction removed
	// some, or more than the gateway's recovery limit followed): the events
	// from first on were sent, those between last and first are lost to
	// this subscriber. It runs on the connection's reader; return quickly.
	OnLiveGap func(topic string, last, first uint64)
	// RateLimitWait, when positive, makes Publish wait and retry by itself
	// when the gateway answers rate_limited, for at most this long in all
	// (and never past the ctx's deadline); then it returns the last
	// rate_limited error. Zero returns rate_limited at once (see
	// facade.RetryAfter for the wait it asks for).
	RateLimitWait time.Duration
	// OutboundQueue is how many frames may wait to be written (default
	// 4096); when it is full, calls wait.
	OutboundQueue int
	// NoBatch: do not ask the gateway for batched frames. By default the
	// client asks (AUTH "batch":true): the gateway then sends the frames
	// queued for the connection together, several in one WebSocket
	// message, and the client sends its queued ACKs likewise; see
	// docs/protocol.md.
	NoBatch bool
	// Logger receives the client's logs; nil discards them.
	Logger *slog.Logger
}

// Validate reports every invalid setting, joined, in the order of the
// fields.
func (c Config) Validate() error {
	var errs []error
	for _, s := range []struct {
		name string
		d    time.Duration
	}{
		{"RequestTimeout", c.RequestTimeout}, {"HandshakeTimeout", c.HandshakeTimeout},
		{"WriteTimeout", c.WriteTimeout}, {"IdleTimeout", c.IdleTimeout},
		{"ReconnectMin", c.ReconnectMin}, {"ReconnectMax", c.ReconnectMax},
	} {
		if s.d < 0 {
			errs = append(errs, fmt.Errorf("client: %s must not be negative", s.name))
		}
	}
	if c.OutboundQueue < 0 {
		errs = append(errs, errors.New("client: OutboundQueue must not be negative"))
	}
	d := c.withDefaults()
	if d.ReconnectMin > d.ReconnectMax {
		errs = append(errs, fmt.Errorf("client: ReconnectMin %v above ReconnectMax %v", d.ReconnectMin, d.ReconnectMax))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.ReconnectMin == 0 {
		c.ReconnectMin = DefaultReconnectMin
	}
	if c.ReconnectMax == 0 {
		c.ReconnectMax = max(DefaultReconnectMax, c.ReconnectMin)
	}
	if c.OutboundQueue == 0 {
		c.OutboundQueue = DefaultOutboundQueue
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}
