package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"
)

// Defaults of [Config]. They are applied in one place, [Config.withDefaults].
const (
	DefaultMaxFrameBytes     = 1<<20 + 64<<10 // 1 MiB payload + envelope headroom
	DefaultMaxPayloadBytes   = 1 << 20
	DefaultMaxInflightPerSub = 100
	DefaultGroupMaxInFlight  = 10_000
	DefaultMaxSubscriptions  = 128
	DefaultAckTimeout        = 30 * time.Second
	DefaultMaxAckTimeout     = 10 * time.Minute
	DefaultWriteTimeout      = 10 * time.Second
	DefaultPingInterval      = 25 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultOutboundQueue     = 1024
	DefaultLiveRecoveryLimit = 10_000
	DefaultLivePending       = 10_000
	DefaultAuthTimeout       = 2 * time.Second
	DefaultRequestTimeout    = 10 * time.Second
	DefaultHandshakeTimeout  = 10 * time.Second
)

// Config configures a [Gateway]. The zero value is valid: it serves
// without authentication, with the defaults above.
type Config struct {
	// Token, when set, is the static token every client must present (AUTH
	// frame, or "Authorization: Bearer" for HTTP). It grants every right.
	// Compared in constant time; never logged.
	Token string `yaml:"-"`
	// Authenticator, when set, authenticates tokens and returns the
	// per-connection [Principal]. Set Token or Authenticator, not both.
	// Neither: every client is allowed everything (see
	// [Config.AuthConfigured]).
	Authenticator Authenticator `yaml:"-"`
	// AllowedOrigins lists the browser origins ("https://app.example.com")
	// allowed to open a WebSocket or POST to /publish besides the gateway's
	// own origin. "*" allows every origin and must be listed explicitly.
	// Requests without an Origin header (non-browser clients) are allowed.
	AllowedOrigins []string `yaml:"allowedOrigins"`
	// MaxFrameBytes is the largest client frame accepted (default 1 MiB +
	// 64 KiB). A larger frame is answered with ERR frame_too_large and
	// discarded; a frame over four times the limit closes the connection
	// (1009).
	MaxFrameBytes int64 `yaml:"maxFrameBytes"`
	// MaxPayloadBytes limits the body of POST /publish (default 1 MiB).
	MaxPayloadBytes int64 `yaml:"maxPayloadBytes"`
	// MaxInflightPerSub is the most events one subscription of one
	// connection has delivered and not yet acknowledged (default 100). The
	// gateway subscribes to the bus with this window, so a slow client
	// pauses its subscription instead of losing events.
	MaxInflightPerSub int `yaml:"maxInflightPerSub"`
	// GroupMaxInFlight is the window of a whole group across the
	// connections subscribed to it (JetStream's MaxAckPending; default
	// 10 000): each connection takes at most MaxInflightPerSub of it.
	GroupMaxInFlight int `yaml:"groupMaxInFlight"`
	// OnAuthFailure, if set, is called for every refused authentication or
	// authorisation with the transport ("ws", "http") and the error code
	// (metrics). It must be safe for concurrent use and quick.
	OnAuthFailure func(transport, code string) `yaml:"-"`
	// LiveRecoveryLimit is the most events a live subscription's recovery
	// (opts.since) sends (default 10 000); past it the OK says
	// recovered: false and the subscription goes on live.
	LiveRecoveryLimit int `yaml:"liveRecoveryLimit"`
	// LivePending is how many live events may wait for one subscription
	// while it recovers (default 10 000); past it the subscription fails
	// as slow_client.
	LivePending int `yaml:"livePending"`
	// MaxSubscriptions is the most subscriptions one connection may hold
	// (default 128).
	MaxSubscriptions int `yaml:"maxSubscriptions"`
	// AckTimeout is the lease of a delivered event when the SUBSCRIBE does
	// not set ackTimeoutMs (default 30s).
	AckTimeout time.Duration `yaml:"ackTimeout"`
	// MaxAckTimeout caps a subscription's ackTimeoutMs and a MODACK's
	// extend_ms (default 10m).
	MaxAckTimeout time.Duration `yaml:"maxAckTimeout"`
	// WriteTimeout bounds each write to a client (default 10s): a client
	// that does not read is disconnected, it does not stall others.
	WriteTimeout time.Duration `yaml:"writeTimeout"`
	// PingInterval is how often the gateway pings a client (default 25s).
	PingInterval time.Duration `yaml:"pingInterval"`
	// IdleTimeout closes a connection that sent nothing, not even a pong,
	// for this long (default 60s). It must exceed PingInterval.
	IdleTimeout time.Duration `yaml:"idleTimeout"`
	// OutboundQueue is how many frames may wait to be written to one
	// client (default 1024). A client whose queue is full is disconnected
	// as too slow (close 4001) and its in-flight events are handed back.
	OutboundQueue int `yaml:"outboundQueue"`
	// AuthTimeout is how long a new connection has to authenticate
	// (default 2s); then it is closed (4003).
	AuthTimeout time.Duration `yaml:"authTimeout"`
	// RequestTimeout bounds the bus calls a frame causes (publish,
	// subscribe, cursor) (default 10s).
	RequestTimeout time.Duration `yaml:"requestTimeout"`
	// HandshakeTimeout bounds the WebSocket handshake (default 10s).
	HandshakeTimeout time.Duration `yaml:"handshakeTimeout"`
	// Limiter, if set, applies rate limits and connection quotas to
	// publishes and connections; nil limits nothing.
	Limiter Limiter `yaml:"-"`
	// Logger receives the gateway's logs; nil discards them. Tokens are
	// never logged.
	Logger *slog.Logger `yaml:"-"`
}

// AuthConfigured reports whether clients must authenticate (Token or
// Authenticator is set). A gateway without authentication should only
// listen on loopback.
func (c Config) AuthConfigured() bool {
	return c.Token != "" || c.Authenticator != nil
}

// Validate reports the first invalid setting. Zero values are valid (they
// mean "default").
func (c Config) Validate() error {
	var errs []error
	if c.Token != "" && c.Authenticator != nil {
		errs = append(errs, errors.New("gateway: set Token or Authenticator, not both"))
	}
	for _, o := range c.AllowedOrigins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			errs = append(errs, fmt.Errorf("gateway: allowed origin %q: want scheme://host[:port] or *", o))
		}
	}
	neg := func(name string, v int64) {
		if v < 0 {
			errs = append(errs, fmt.Errorf("gateway: %s must not be negative", name))
		}
	}
	neg("MaxFrameBytes", c.MaxFrameBytes)
	neg("MaxPayloadBytes", c.MaxPayloadBytes)
	neg("MaxInflightPerSub", int64(c.MaxInflightPerSub))
	neg("GroupMaxInFlight", int64(c.GroupMaxInFlight))
	neg("MaxSubscriptions", int64(c.MaxSubscriptions))
	neg("LiveRecoveryLimit", int64(c.LiveRecoveryLimit))
	neg("LivePending", int64(c.LivePending))
	neg("AckTimeout", int64(c.AckTimeout))
	neg("MaxAckTimeout", int64(c.MaxAckTimeout))
	neg("WriteTimeout", int64(c.WriteTimeout))
	neg("PingInterval", int64(c.PingInterval))
	neg("IdleTimeout", int64(c.IdleTimeout))
	neg("OutboundQueue", int64(c.OutboundQueue))
	neg("AuthTimeout", int64(c.AuthTimeout))
	neg("RequestTimeout", int64(c.RequestTimeout))
	neg("HandshakeTimeout", int64(c.HandshakeTimeout))
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	d := c.withDefaults()
	if d.MaxInflightPerSub > 100_000 {
		errs = append(errs, fmt.Errorf("gateway: MaxInflightPerSub %d above 100000", d.MaxInflightPerSub))
	}
	if d.AckTimeout < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("gateway: AckTimeout %v below 100ms", d.AckTimeout))
	}
	if d.AckTimeout > d.MaxAckTimeout {
		errs = append(errs, fmt.Errorf("gateway: AckTimeout %v above MaxAckTimeout %v", d.AckTimeout, d.MaxAckTimeout))
	}
	if d.MaxAckTimeout > 24*time.Hour {
		errs = append(errs, fmt.Errorf("gateway: MaxAckTimeout %v above 24h", d.MaxAckTimeout))
	}
	if d.PingInterval >= d.IdleTimeout {
		errs = append(errs, fmt.Errorf("gateway: PingInterval %v must be below IdleTimeout %v", d.PingInterval, d.IdleTimeout))
	}
	if d.MaxFrameBytes < 1024 {
		errs = append(errs, fmt.Errorf("gateway: MaxFrameBytes %d below 1024", d.MaxFrameBytes))
	}
	return errors.Join(errs...)
}

// WithDefaults returns c with every unset setting at its default, as
// [New] applies them.
func (c Config) WithDefaults() Config { return c.withDefaults() }

func (c Config) withDefaults() Config {
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if c.GroupMaxInFlight == 0 {
		c.GroupMaxInFlight = DefaultGroupMaxInFlight
	}
	if c.MaxInflightPerSub == 0 {
		c.MaxInflightPerSub = DefaultMaxInflightPerSub
	}
	if c.MaxSubscriptions == 0 {
		c.MaxSubscriptions = DefaultMaxSubscriptions
	}
	if c.LiveRecoveryLimit == 0 {
		c.LiveRecoveryLimit = DefaultLiveRecoveryLimit
	}
	if c.LivePending == 0 {
		c.LivePending = DefaultLivePending
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.MaxAckTimeout == 0 {
		c.MaxAckTimeout = max(DefaultMaxAckTimeout, c.AckTimeout)
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.PingInterval == 0 {
		c.PingInterval = DefaultPingInterval
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = max(DefaultIdleTimeout, 2*c.PingInterval)
	}
	if c.OutboundQueue == 0 {
		c.OutboundQueue = DefaultOutboundQueue
	}
	if c.AuthTimeout == 0 {
		c.AuthTimeout = DefaultAuthTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// originAllowed reports whether a browser Origin may connect: no Origin
// header, the request's own host, or an entry of AllowedOrigins.
func (c Config) originAllowed(origin, host string) bool {
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	for _, o := range c.AllowedOrigins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}
