package acl

import (
	"fmt"
	"strings"

	"github.com/eventhub/eventhub/pattern"
)

// ScopesToPolicy converts OAuth-style scopes into a Policy of allow rules,
// one per scope, in order. Each scope is "<action>:<pattern>" where action
// is "publish", "subscribe" or "*" and pattern is a topic pattern, e.g.
// "publish:heartbeat.*", "subscribe:process.**", "*:**". The scope is split
// on its first ':' only, so the pattern may itself contain ':' (as in
// "publish:tenant:1.events").
//
// Scopes grant nothing to any other action, so a token's scopes can never
// deny; to express denials embed a "policy" claim instead. Scope rules do
// not restrict queue groups. No scopes yield an empty (deny-all) policy.
//
// A malformed scope (no ':', unknown action, invalid pattern) returns an
// error wrapping ErrBadScope (and ErrBadPattern for a bad pattern).
func ScopesToPolicy(scopes []string) (Policy, error) {
	p := Policy{Rules: make([]Rule, 0, len(scopes))}
	for i, s := range scopes {
		action, topics, ok := strings.Cut(s, ":")
		if !ok {
			return Policy{}, fmt.Errorf("%w: scope %d %q: want \"<action>:<pattern>\"", ErrBadScope, i, s)
		}
		switch Action(action) {
		case ActionPublish, ActionSubscribe, ActionAny:
		default:
			return Policy{}, fmt.Errorf("%w: scope %d %q: unknown action %q (want \"publish\", \"subscribe\" or \"*\")", ErrBadScope, i, s, action)
		}
		if _, err := pattern.Compile(topics); err != nil {
			return Policy{}, fmt.Errorf("%w: scope %d: %w", ErrBadScope, i, err)
		}
		p.Rules = append(p.Rules, Rule{Effect: EffectAllow, Action: Action(action), Topics: []string{topics}})
	}
	return p, nil
}
