// Package acl implements per-connection topic access control for eventhub:
// topic patterns, first-match-wins policies, OAuth-style scopes, and JWT
// verification that turns a bearer token into a compiled policy. The
// WebSocket gateway, the HTTP publish endpoint and the native NATS port all
// use it.
//
// # Topic patterns
//
// Topics are "."-separated, non-empty segments, e.g. "heartbeat.received".
// A pattern (CompilePattern) is the same with wildcards:
//
//   - a literal segment matches itself exactly;
//   - "*" matches exactly one segment;
//   - "**" matches ONE OR MORE segments, at any position, any number of
//     times.
//
// Decision: "**" never matches zero segments. So "a.**" matches "a.b" and
// "a.b.c" but not "a"; "**.c" matches "x.c" and "x.y.c" but not "c";
// "a.**.c" matches "a.x.c" and "a.x.y.c" but not "a.c"; "**" alone matches
// every valid topic. To grant "a" and everything below it, list both "a"
// and "a.**".
//
// Invalid patterns (error wrapping ErrBadPattern): empty, an empty segment,
// '*' mixed with other characters ("a*", "***"), a ">" segment (reserved: it
// is the NATS full wildcard), whitespace or control characters. Patterns
// are compiled once; matching is allocation-free for topics of up to 16
// segments and runs in O(pattern × topic) worst case.
//
// # Policies
//
// A Policy is an ordered list of Rules {effect, action, topics, groups}.
// The first rule whose action ("publish", "subscribe" or "*"), topic
// patterns and, for subscribe only, queue groups match decides; no match
// means deny. A rule with Groups not listing the requested group (and not
// "*") does not match and evaluation continues. CompilePolicy validates and
// compiles a Policy into an immutable CompiledPolicy; AllowAll is the
// wide-open policy for the static-token mode.
//
// CompiledPolicy.Allowed also accepts wildcard subscriptions (a subscribe
// topic containing "*" or "**" segments): they are allowed only if every
// topic they could match is allowed, decided conservatively (see Allowed).
// Topics containing ">" segments, '*' inside a segment ("a*"), whitespace
// or control characters are always denied, so a subject passed on to NATS
// can never smuggle in a NATS wildcard that the policy did not see.
//
// # Scopes and claims
//
// ScopesToPolicy turns scopes "<action>:<pattern>" (split on the first ':')
// into allow rules. A verified token (Verifier.Verify) yields Claims; its
// scopes may come as a "scopes" JSON array or an OAuth "scope"
// space-separated string (both accepted, merged). Scopes not addressed to
// eventhub (no "publish:", "subscribe:" or "*:" prefix, e.g. "openid") are
// ignored; a malformed eventhub scope rejects the token. An embedded
// "policy" claim takes precedence over scopes. Claims.CompiledPolicy
// returns the policy to enforce. CompiledPolicy.NATSPermissions translates
// a policy into NATS allow lists when that is exact.
//
// # JWT verification
//
// NewVerifier accepts HS256 tokens with a shared Secret and/or
// RS256/ES256/EdDSA tokens from a JWKS URL (cached, refreshed in the
// background and on an unknown kid at a limited rate; Close stops the
// refresh). The key is chosen from the token's alg, so an HMAC token is
// never checked against a public key and vice versa; "none" is never
// accepted; exp is required; aud and iss are checked when configured.
// Every failure is an *Error whose Code is stable and which matches one of
// the exported sentinels with errors.Is (ErrTokenMissing, ErrTokenMalformed,
// ErrTokenExpired, ErrTokenNotYetValid, ErrBadSignature, ErrBadAlgorithm,
// ErrBadAudience, ErrBadIssuer, ErrMissingExp, ErrUnknownKey, ErrBadPolicy).
// Error texts never contain the token or the secret. MintHS256 mints
// development tokens.
//
// # Concurrency
//
// Pattern, CompiledPolicy and Verifier are safe for concurrent use. The
// package has no global mutable state. WithPolicy/PolicyFrom (and
// WithClaims/ClaimsFrom) carry the per-connection policy in a context under
// unexported keys.
package acl
