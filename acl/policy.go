package acl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/eventhub/eventhub/pattern"
)

// Effect is what a matching Rule decides.
type Effect string

// Rule effects.
const (
	EffectAllow Effect = "allow"
	EffectDeny  Effect = "deny"
)

// Action is an operation on a topic.
type Action string

// Actions. ActionAny is only meaningful in a Rule (it matches both
// ActionPublish and ActionSubscribe); CompiledPolicy.Allowed refuses it as a
// requested action.
const (
	ActionPublish   Action = "publish"
	ActionSubscribe Action = "subscribe"
	ActionAny       Action = "*"
)

// Rule is one entry of a Policy. A rule matches a request when its Action is
// the requested action or "*", one of its Topics patterns matches the topic
// (see package pattern), and, for subscribe requests only, its Groups admit the
// requested queue group. Groups lists queue-group names, "*" meaning any
// group; an empty Groups admits any group, including no group (""). A
// non-empty Groups without "*" does not admit the empty group. Groups is
// ignored for publish.
type Rule struct {
	Effect Effect   `json:"effect"`
	Action Action   `json:"action"`
	Topics []string `json:"topics"`
	Groups []string `json:"groups,omitempty"`
}

// Policy is an ordered list of rules: the first matching rule decides, and
// a request no rule matches is denied. Policy is plain data (it is what a
// token's "policy" claim decodes into); compile it with CompilePolicy before
// use.
type Policy struct {
	Rules []Rule `json:"rules"`
}

// UnmarshalJSON decodes a rule strictly: unknown fields (such as a
// misspelt "group") are an error wrapping ErrBadPolicy rather than being
// silently ignored, since ignoring one could widen access.
func (r *Rule) UnmarshalJSON(b []byte) error {
	type plain Rule
	var v plain
	if err := decodeStrict(b, &v); err != nil {
		return fmt.Errorf("%w: rule: %w", ErrBadPolicy, err)
	}
	*r = Rule(v)
	return nil
}

// UnmarshalJSON decodes a policy strictly (see Rule.UnmarshalJSON).
func (p *Policy) UnmarshalJSON(b []byte) error {
	type plain Policy
	var v plain
	if err := decodeStrict(b, &v); err != nil {
		return fmt.Errorf("%w: %w", ErrBadPolicy, err)
	}
	*p = Policy(v)
	return nil
}

// decodeStrict unmarshals one JSON value b into v rejecting unknown
// fields.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// compiledRule is a validated Rule.
type compiledRule struct {
	allow    bool
	action   Action
	topics   []pattern.Pattern
	anyGroup bool
	groups   []string
}

// CompiledPolicy is a validated, compiled Policy. It is immutable and safe
// for concurrent use by multiple goroutines. A nil *CompiledPolicy denies
// everything.
type CompiledPolicy struct {
	rules []compiledRule
	src   Policy
}

// CompilePolicy validates and compiles p. Errors wrap ErrBadPolicy, and
// also ErrBadPattern when a topic pattern is invalid. Invalid are: an effect
// other than "allow"/"deny", an action other than "publish"/"subscribe"/"*",
// a rule without topics, an invalid pattern, an empty group name or one
// containing whitespace. An empty Policy compiles to deny-all.
func CompilePolicy(p Policy) (*CompiledPolicy, error) {
	cp := &CompiledPolicy{rules: make([]compiledRule, 0, len(p.Rules)), src: clonePolicy(p)}
	for i, r := range p.Rules {
		cr := compiledRule{action: r.Action}
		switch r.Effect {
		case EffectAllow:
			cr.allow = true
		case EffectDeny:
		default:
			return nil, fmt.Errorf("%w: rule %d: unknown effect %q (want \"allow\" or \"deny\")", ErrBadPolicy, i, r.Effect)
		}
		switch r.Action {
		case ActionPublish, ActionSubscribe, ActionAny:
		default:
			return nil, fmt.Errorf("%w: rule %d: unknown action %q (want \"publish\", \"subscribe\" or \"*\")", ErrBadPolicy, i, r.Action)
		}
		if len(r.Topics) == 0 {
			return nil, fmt.Errorf("%w: rule %d: no topics", ErrBadPolicy, i)
		}
		for _, t := range r.Topics {
			pat, err := pattern.Compile(t)
			if err != nil {
				return nil, fmt.Errorf("%w: rule %d: %w", ErrBadPolicy, i, err)
			}
			cr.topics = append(cr.topics, pat)
		}
		cr.anyGroup = len(r.Groups) == 0
		for _, g := range r.Groups {
			switch {
			case g == "*":
				cr.anyGroup = true
			case g == "" || pattern.HasSpaceOrControl(g):
				return nil, fmt.Errorf("%w: rule %d: invalid group name %q", ErrBadPolicy, i, g)
			default:
				cr.groups = append(cr.groups, g)
			}
		}
		cp.rules = append(cp.rules, cr)
	}
	return cp, nil
}

// clonePolicy returns a deep copy of p.
func clonePolicy(p Policy) Policy {
	out := Policy{Rules: make([]Rule, len(p.Rules))}
	for i, r := range p.Rules {
		out.Rules[i] = Rule{
			Effect: r.Effect,
			Action: r.Action,
			Topics: slices.Clone(r.Topics),
			Groups: slices.Clone(r.Groups),
		}
	}
	return out
}

// AllowAll returns a compiled policy that allows every action on every
// topic for every group (including wildcard subscriptions). It is meant for
// the static-token mode, where authentication grants full access.
func AllowAll() *CompiledPolicy {
	cp, err := CompilePolicy(Policy{Rules: []Rule{{Effect: EffectAllow, Action: ActionAny, Topics: []string{"**"}}}})
	if err != nil {
		panic("acl: AllowAll policy does not compile: " + err.Error()) // unreachable
	}
	return cp
}

// Policy returns a deep copy of the source policy.
func (p *CompiledPolicy) Policy() Policy {
	if p == nil {
		return Policy{}
	}
	return clonePolicy(p.src)
}

// applies reports whether the rule's action and groups admit the request.
func (r *compiledRule) applies(action Action, group string) bool {
	if r.action != ActionAny && r.action != action {
		return false
	}
	if action != ActionSubscribe || r.anyGroup {
		return true
	}
	return slices.Contains(r.groups, group)
}

// Allowed reports whether the policy allows action (ActionPublish or
// ActionSubscribe) on topic; group is the subscriber's queue group ("" for
// none) and is ignored for publish. The first rule that matches decides;
// nothing matching means deny. It is safe for concurrent use and does not
// allocate for concrete topics of up to 16 segments.
//
// Always denied: a nil policy, any other action (including ActionAny), an
// empty topic, a topic with an empty segment, whitespace or a control
// character, a ">" segment (the NATS full wildcard), or a '*' inside a
// segment ("a*": neither a literal nor a valid wildcard).
//
// Wildcard subscriptions: a subscribe topic with a "*" or "**" segment is a
// subscription pattern, not a topic. It is allowed only if every topic it
// can match would be allowed. The check is conservative (it may deny a
// subscription that exact analysis would allow, never the reverse): rules
// are scanned in order; a deny rule whose patterns could match any topic of
// the subscription denies; an allow rule with a pattern that covers the
// whole subscription allows; other rules are skipped. Publishing to a
// wildcard topic is always denied.
func (p *CompiledPolicy) Allowed(action Action, topic, group string) bool {
	if p == nil || (action != ActionPublish && action != ActionSubscribe) {
		return false
	}
	var buf [16]string
	segs, ok := pattern.SplitTopic(topic, buf[:0])
	if !ok {
		return false
	}
	wild := false
	for _, s := range segs {
		switch {
		case s == "*" || s == "**":
			wild = true
		case s == ">" || strings.Contains(s, "*") || pattern.HasSpaceOrControl(s):
			return false
		}
	}
	if wild {
		if action != ActionSubscribe {
			return false
		}
		sub, err := pattern.Compile(topic)
		if err != nil {
			return false
		}
		return p.allowedAll(ActionSubscribe, sub, group)
	}
	for i := range p.rules {
		r := &p.rules[i]
		if !r.applies(action, group) {
			continue
		}
		for j := range r.topics {
			if r.topics[j].MatchSplit(topic, segs) {
				return r.allow
			}
		}
	}
	return false
}

// AllowedAll reports whether the policy allows action on every topic that
// topics (a topic pattern, wildcards allowed) can match, decided
// conservatively as for wildcard subscriptions (see Allowed): it may answer
// false where exact analysis would answer true, never the reverse. A
// pattern without wildcards is one topic, as for Allowed. An invalid
// pattern is never allowed.
func (p *CompiledPolicy) AllowedAll(action Action, topics, group string) bool {
	if p == nil || (action != ActionPublish && action != ActionSubscribe) {
		return false
	}
	pat, err := pattern.Compile(topics)
	if err != nil {
		return false
	}
	if pat.IsLiteral() {
		return p.Allowed(action, topics, group)
	}
	return p.allowedAll(action, pat, group)
}

// allowedAll implements the conservative wildcard check documented on
// Allowed. Soundness: if it returns true at allow rule k, every topic t of
// the pattern is first matched either by rule k or by an earlier rule, and
// no earlier deny rule intersects the pattern, so that earlier rule is an
// allow.
func (p *CompiledPolicy) allowedAll(action Action, sub pattern.Pattern, group string) bool {
	for i := range p.rules {
		r := &p.rules[i]
		if !r.applies(action, group) {
			continue
		}
		for _, pat := range r.topics {
			if r.allow {
				if pat.Covers(sub) {
					return true
				}
			} else if pat.Intersects(sub) {
				return false
			}
		}
	}
	return false
}
