// Package auth is the hub's authentication for every way in: WebSocket AUTH
// frames, HTTP bearer tokens (publish and ops endpoints) and native NATS
// clients of the embedded server. A token is either the static token
// (WS_TOKEN, wide open) or a JWT verified by [Verifier]; either way it yields
// an [Identity] whose ACL policy is bound to that one connection or request,
// never to the process.
package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/eventhub/eventhub/acl"
	"github.com/eventhub/eventhub/internal/token"
)

// Config says which tokens are accepted. With neither Token nor JWT
// configured, authentication is off ([Authenticator.Configured] is false)
// and the hub only listens on loopback.
type Config struct {
	// Token is the static token (at least 16 characters) that grants
	// everything, or StaticPolicy when that is set, for WebSocket, HTTP and
	// native NATS clients.
	Token string `yaml:"token"`
	// StaticPolicy is what the static token may do; nil allows everything.
	StaticPolicy *acl.Policy `yaml:"-"`
	// JWT verifies bearer JWTs; on when its secret or jwksURL is set.
	JWT VerifierConfig `yaml:"jwt"`
	// NativeScoped puts native NATS clients whose tokens are scoped to
	// topics (no admin scope, or a static token with a StaticPolicy) in
	// one shared NATS account, with rights derived from their policy: the
	// hub's account on the embedded server (faster than the account of
	// its own each gets when off), the auth callout's on an external
	// server (refused there when off). In a shared account NATS cannot
	// keep a client to its policy on reply subjects (a publish or a
	// JetStream request whose reply subject names another topic has the
	// server write there), nor keep clients out of each other's _INBOX
	// replies: turn it on only where every native client is trusted with
	// the topics of every other.
	NativeScoped bool `yaml:"nativeScopedClients"`
}

func (c Config) jwtConfigured() bool { return len(c.JWT.Secret) > 0 || c.JWT.JWKSURL != "" }

// Enabled reports whether the configuration turns authentication on.
func (c Config) Enabled() bool { return c.Token != "" || c.jwtConfigured() }

// Identity is who a token belongs to and what it may do. It satisfies the
// gateway's Principal interface.
type Identity struct {
	Subject string
	Policy  *acl.CompiledPolicy
	// Expires is when the token stops being accepted: its exp plus the
	// verifier's clock-skew leeway, the same instant on every way in (a
	// WebSocket session and a native NATS connection end then). Zero for
	// the static token.
	Expires time.Time
	// Static is true for the static token.
	Static bool
	// staticAll is true for the static token when no StaticPolicy
	// restricts it: only then does it hold every scope.
	staticAll bool
	// Scopes are the token's scopes, eventhub's topic scopes and others
	// (such as "admin" or "metrics") alike.
	Scopes []string
}

// HasScope reports whether the identity holds scope; the static token holds
// every scope unless a StaticPolicy restricts it (then it holds none: a
// right is the same on every way in, and natively such a token is no
// admin either).
func (id *Identity) HasScope(scope string) bool {
	return id.staticAll || slices.Contains(id.Scopes, scope)
}

// Allow reports whether action on topic (and group, for subscribe) is
// allowed.
func (id *Identity) Allow(action, topic, group string) bool {
	return id.Policy.Allowed(acl.Action(action), topic, group)
}

// ExpiresAt is when the identity's token expires (zero: never).
func (id *Identity) ExpiresAt() time.Time { return id.Expires }

// Authenticator checks tokens. It is safe for concurrent use.
type Authenticator struct {
	static       token.Digest
	hasStatic    bool
	staticPolicy *acl.CompiledPolicy
	// staticAll: the static token's policy allows everything.
	staticAll bool
	verifier  *Verifier
	// nativeScoped: Config.NativeScoped.
	nativeScoped bool
}

// MinStaticTokenLen is the shortest static token (Config.Token) New accepts.
const MinStaticTokenLen = 16

// New builds an Authenticator; with a JWKS URL it fetches the keys first and
// keeps refreshing them until Close, under ctx.
func New(ctx context.Context, cfg Config) (*Authenticator, error) {
	a := &Authenticator{staticPolicy: acl.AllowAll(), staticAll: true, nativeScoped: cfg.NativeScoped}
	if cfg.Token != "" {
		if len(cfg.Token) < MinStaticTokenLen {
			return nil, fmt.Errorf("auth: the static token must be at least %d characters", MinStaticTokenLen)
		}
		a.static = token.Of(cfg.Token)
		a.hasStatic = true
		if cfg.StaticPolicy != nil {
			p, err := acl.CompilePolicy(*cfg.StaticPolicy)
			if err != nil {
				return nil, fmt.Errorf("auth: static token policy: %w", err)
			}
			a.staticPolicy, a.staticAll = p, false
		}
	}
	if cfg.jwtConfigured() {
		v, err := NewVerifier(ctx, cfg.JWT)
		if err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
		a.verifier = v
	}
	return a, nil
}

// Configured reports whether any authentication is on.
func (a *Authenticator) Configured() bool { return a != nil && (a.hasStatic || a.verifier != nil) }

// Close stops the JWKS refresh, if any.
func (a *Authenticator) Close() {
	if a != nil && a.verifier != nil {
		a.verifier.Close()
	}
}

// ErrNoAuth is returned by Authenticate when authentication is off.
var ErrNoAuth = errors.New("auth: not configured")

// Authenticate checks token. Errors are acl's coded errors (bad_token,
// token_expired, …) and never contain the token.
func (a *Authenticator) Authenticate(ctx context.Context, tok string) (*Identity, error) {
	if !a.Configured() {
		return nil, ErrNoAuth
	}
	if tok == "" {
		return nil, ErrTokenMissing
	}
	if a.hasStatic {
		if a.static.Matches(tok) {
			return &Identity{Subject: "static-token", Policy: a.staticPolicy, Static: true, staticAll: a.staticAll}, nil
		}
		if a.verifier == nil {
			return nil, ErrTokenMalformed
		}
	}
	claims, err := a.verifier.Verify(ctx, tok)
	if err != nil {
		return nil, err
	}
	p, err := claims.CompiledPolicy()
	if err != nil {
		return nil, err
	}
	return &Identity{Subject: claims.Subject, Policy: p, Expires: claims.ValidUntil, Scopes: claims.Scopes}, nil
}

// Name returns the identity's subject, for listings such as the gateway's
// sessions and the admin API's audit log.
func (id *Identity) Name() string { return id.Subject }
