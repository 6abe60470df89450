package gateway

import (
	"context"
	"time"

	"github.com/eventhub/eventhub/internal/token"
	"github.com/eventhub/eventhub/wire"
)

// Actions a [Principal] is asked about.
const (
	// ActionPublish: PUBLISH frames and POST /publish; group is "".
	ActionPublish = "publish"
	// ActionSubscribe: SUBSCRIBE, and the CURSOR and SEEK extensions.
	ActionSubscribe = "subscribe"
)

// Authenticator turns the token of an AUTH frame or of an HTTP bearer
// header into a [Principal]. It is called once per connection (and per
// HTTP request); the principal it returns is bound to that connection only.
//
// Authenticate may block (a JWKS fetch); ctx bounds it. Its error is
// reported to the client as ERR bad_token with the error's text, so the
// text must not contain the token. It must be safe for concurrent use.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (Principal, error)
}

// AuthenticatorFunc adapts a function to [Authenticator].
type AuthenticatorFunc func(ctx context.Context, token string) (Principal, error)

// Authenticate calls f.
func (f AuthenticatorFunc) Authenticate(ctx context.Context, token string) (Principal, error) {
	return f(ctx, token)
}

// Principal is what one authenticated connection may do. It must be safe
// for concurrent use.
type Principal interface {
	// Allow reports whether action (ActionPublish, ActionSubscribe) on
	// topic, and for subscribe the group, is allowed.
	Allow(action, topic, group string) bool
	// ExpiresAt is when the credentials expire; the gateway closes the
	// connection then (4501). The zero time means never.
	ExpiresAt() time.Time
}

// AllowAll is the principal that may do everything and never expires: what
// a static token, or no authentication at all, grants.
var AllowAll Principal = allowAll{}

type allowAll struct{}

func (allowAll) Allow(string, string, string) bool { return true }
func (allowAll) ExpiresAt() time.Time              { return time.Time{} }

// HasScope: the principal without authentication holds every scope.
func (allowAll) HasScope(string) bool { return true }

// scopeAdmin is the operator scope ("admin") that a destructive key
// operation (purging a key's history) needs beside the publish right.
const scopeAdmin = "admin"

// isAdmin reports whether p holds the admin scope: a Principal that has
// scopes beside its topic rules says so with HasScope.
func isAdmin(p Principal) bool {
	s, ok := p.(interface{ HasScope(string) bool })
	return ok && s.HasScope(scopeAdmin)
}

// StaticToken returns an [Authenticator] that accepts exactly token
// (compared in constant time, also in length) and grants [AllowAll].
func StaticToken(tok string) Authenticator {
	want := token.Of(tok)
	return AuthenticatorFunc(func(_ context.Context, got string) (Principal, error) {
		if !want.Matches(got) {
			return nil, wire.ErrBadToken
		}
		return AllowAll, nil
	})
}

// noAuth accepts every token, including none.
var noAuth = AuthenticatorFunc(func(context.Context, string) (Principal, error) {
	return AllowAll, nil
})

// authenticator is the Authenticator that cfg configures.
func (c Config) authenticator() Authenticator {
	switch {
	case c.Authenticator != nil:
		return c.Authenticator
	case c.Token != "":
		return StaticToken(c.Token)
	}
	return noAuth
}
