package acl

import "context"

// policyKey is an unexported context key; only this package can set or
// read the value it indexes.
type policyKey struct{}

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
