package acl

import (
	"fmt"
	"strings"
)

// CompileClaims compiles the policy of a token's claims: the embedded
// policy p when it is non-nil (even without rules: deny all), else the
// policy ScopesToPolicy builds from the scopes addressed to eventhub (those
// starting "publish:", "subscribe:" or "*:"; other scopes such as "openid"
// are ignored). Errors wrap ErrBadPolicy. It is a pure function.
func CompileClaims(p *Policy, scopes []string) (*CompiledPolicy, error) {
	if p != nil {
		return CompilePolicy(*p)
	}
	sp, err := ScopesToPolicy(ownScopes(scopes))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadPolicy, err)
	}
	return CompilePolicy(sp)
}

// ownScopes returns the scopes addressed to eventhub, those whose part
// before the first ':' is "publish", "subscribe" or "*". Other scopes (an
// identity provider's "openid", "profile", "read:users", ...) are ignored:
// scopes only ever grant, so dropping foreign ones grants nothing extra.
func ownScopes(scopes []string) []string {
	out := make([]string, 0, len(scopes))
	for _, s := range scopes {
		action, _, _ := strings.Cut(s, ":")
		switch Action(action) {
		case ActionPublish, ActionSubscribe, ActionAny:
			out = append(out, s)
		}
	}
	return out
}
