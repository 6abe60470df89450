package acl

import "context"

// policyKey and claimsKey are unexported context keys; only this package
// can set or read the values they index.
type (
	policyKey struct{}
	claimsKey struct{}
)

// WithPolicy returns a copy of ctx carrying p, for handlers downstream of
// authentication.
func WithPolicy(ctx context.Context, p *CompiledPolicy) context.Context {
	return context.WithValue(ctx, policyKey{}, p)
}

// PolicyFrom returns the policy stored by WithPolicy. ok is false if there
// is none or it is nil; callers must then deny (a nil *CompiledPolicy also
// denies everything).
func PolicyFrom(ctx context.Context) (p *CompiledPolicy, ok bool) {
	p, ok = ctx.Value(policyKey{}).(*CompiledPolicy)
	return p, ok && p != nil
}

// WithClaims returns a copy of ctx carrying the verified claims c (for
// logging the subject, or reading expiry). The claims must not be modified
// afterwards.
func WithClaims(ctx context.Context, c *Claims) context.Context {
	return context.WithValue(ctx, claimsKey{}, c)
}

// ClaimsFrom returns the claims stored by WithClaims; ok is false if there
// are none.
func ClaimsFrom(ctx context.Context) (c *Claims, ok bool) {
	c, ok = ctx.Value(claimsKey{}).(*Claims)
	return c, ok && c != nil
}
