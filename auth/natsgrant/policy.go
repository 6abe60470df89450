package natsgrant

import (
	"slices"

	"github.com/eventhub/eventhub/acl"
	"github.com/eventhub/eventhub/pattern"
)

// topicEntries translates the policy's allow rules into NATS subjects:
// pub for publish, sub for subscribe. Topic patterns map to NATS subjects
// unchanged except that a trailing "**" becomes ">" (both mean one or more
// tokens); a subscribe rule restricted to groups yields one
// "subject group" entry per group. Both lists are non-nil (NATS treats a
// nil allow list as allow-all). A nil policy grants nothing.
//
// The lists grant exactly what the policy's rules grant for concrete
// topics, or the policy is refused (an error wrapping ErrNotExpressible):
// a "**" that is not the last segment, or a deny rule that a later allow
// rule of the same action overlaps (allow lists cannot carve it out).
func topicEntries(p *acl.CompiledPolicy) (pub, sub []string, err error) {
	rules := p.Policy().Rules
	if pub, err = actionEntries(rules, acl.ActionPublish); err != nil {
		return nil, nil, err
	}
	if sub, err = actionEntries(rules, acl.ActionSubscribe); err != nil {
		return nil, nil, err
	}
	return pub, sub, nil
}

// actionEntries builds the entries of one action; see topicEntries.
func actionEntries(rules []acl.Rule, action acl.Action) ([]string, error) {
	out := []string{}
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	applies := func(r acl.Rule) bool { return r.Action == acl.ActionAny || r.Action == action }
	for i, r := range rules {
		if !applies(r) {
			continue
		}
		if r.Effect != acl.EffectAllow {
			// The deny only matters where a later allow would grant; if it
			// overlaps one, allow lists cannot express the carve-out.
			for _, later := range rules[i+1:] {
				if later.Effect == acl.EffectAllow && applies(later) && overlap(r.Topics, later.Topics) {
					return nil, notExpressible("deny %v overlaps a later allow %v", r.Topics, later.Topics)
				}
			}
			continue
		}
		anyGroup := len(r.Groups) == 0 || slices.Contains(r.Groups, "*")
		for _, pat := range r.Topics {
			tp, err := pattern.Compile(pat)
			if err != nil {
				return nil, err
			}
			subj, ok := tp.NATSSubject()
			if !ok {
				return nil, notExpressible("%q has \"**\" before its last segment", pat)
			}
			if action == acl.ActionPublish || anyGroup {
				add(subj)
				continue
			}
			for _, g := range r.Groups {
				add(subj + " " + g)
			}
		}
	}
	return out, nil
}

// overlap reports whether some pattern of a and some pattern of b can
// match the same topic (patterns that do not compile never match).
func overlap(a, b []string) bool {
	for _, x := range a {
		px, err := pattern.Compile(x)
		if err != nil {
			continue
		}
		for _, y := range b {
			if py, err := pattern.Compile(y); err == nil && px.Intersects(py) {
				return true
			}
		}
	}
	return false
}
