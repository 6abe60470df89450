// Package acl is eventhub's topic access policy and nothing else: topic
// patterns, first-match-wins policies and OAuth-style scopes (package
// auth/natsgrant translates them into NATS permissions). It does no I/O: verifying a token
// (JWT, JWKS) and minting one is package auth's work, which hands acl the
// token's policy or scopes. The WebSocket gateway, the HTTP publish
// endpoint and the native NATS port all enforce the same compiled policy.
//
// # Topic patterns
//
// Rules name topics by pattern ("orders.*", "orders.**"): the one pattern
// type of eventhub, package pattern, parses and matches them.
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
// topic they could match is allowed, decided conservatively (see Allowed);
// CompiledPolicy.AllowedAll asks the same of a pattern for either action.
// Topics containing ">" segments, '*' inside a segment ("a*"), whitespace
// or control characters are always denied, so a subject passed on to NATS
// can never smuggle in a NATS wildcard that the policy did not see.
//
// # Scopes and claims
//
// ScopesToPolicy turns scopes "<action>:<pattern>" (split on the first ':')
// into allow rules. CompileClaims compiles what a token carries: an
// embedded policy takes precedence over scopes; scopes not addressed to
// eventhub (no "publish:", "subscribe:" or "*:" prefix, e.g. "openid") are
// ignored; a malformed eventhub scope is an error.
//
// Errors are *facade.Error values matching ErrBadPolicy, ErrBadPattern or
// ErrBadScope under errors.Is.
//
// # Concurrency
//
// CompiledPolicy is safe for concurrent use. The package has
// no global mutable state. WithPolicy/PolicyFrom carry the per-connection
// policy in a context under an unexported key.
package acl
