package acl

import (
	"slices"
	"strings"
)

// NATSPermissions translates the policy into NATS allow lists for native
// NATS clients: pub for publish, sub for subscribe. Topic patterns map to
// NATS subjects unchanged except that a trailing "**" becomes ">" (both
// mean one or more tokens); a subscribe rule restricted to queue groups
// yields one "subject group" entry per group (NATS queue permissions).
//
// ok is true only when the lists grant exactly what Allowed grants for
// concrete topics (NATS applies its own subset rule to wildcard
// subscriptions, which agrees with Allowed's for these lists); then
// both slices are non-nil, possibly empty. Pass them to NATS as-is: NATS
// treats a nil Allow list as allow-all but an empty, non-nil one as
// deny-all. ok is false (and the lists nil) when the policy cannot be
// expressed as plain allow lists: a "**" that is not the last segment, or
// a deny rule that could override a later allow rule of the same action.
// The caller must then not hand native NATS access to this principal (or
// enforce the policy some other way).
//
// Subjects are the eventhub topics themselves; a caller that maps topics
// to prefixed NATS subjects must apply the same mapping to these entries.
func (p *CompiledPolicy) NATSPermissions() (pub, sub []string, ok bool) {
	if p == nil {
		return []string{}, []string{}, true
	}
	pub, ok = p.natsAllow(ActionPublish)
	if !ok {
		return nil, nil, false
	}
	sub, ok = p.natsAllow(ActionSubscribe)
	if !ok {
		return nil, nil, false
	}
	return pub, sub, true
}

// natsAllow builds the allow list for one action; see NATSPermissions.
func (p *CompiledPolicy) natsAllow(action Action) ([]string, bool) {
	out := []string{}
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for i := range p.rules {
		r := &p.rules[i]
		if r.action != ActionAny && r.action != action {
			continue
		}
		if !r.allow {
			// the deny only matters where a later allow would grant; if it
			// overlaps one, allow lists cannot express the carve-out
			for _, later := range p.rules[i+1:] {
				if later.allow && (later.action == ActionAny || later.action == action) && anyIntersect(r.topics, later.topics) {
					return nil, false
				}
			}
			continue
		}
		for _, pat := range r.topics {
			subj, ok := natsSubject(pat)
			if !ok {
				return nil, false
			}
			if action == ActionPublish || r.anyGroup {
				add(subj)
				continue
			}
			for _, g := range r.groups {
				add(subj + " " + g)
			}
		}
	}
	return out, true
}

// anyIntersect reports whether some pattern of a and some pattern of b can
// match the same topic.
func anyIntersect(a, b []Pattern) bool {
	for _, x := range a {
		for _, y := range b {
			if intersects(x.segs, y.segs) {
				return true
			}
		}
	}
	return false
}

// natsSubject renders a pattern as a NATS subject; ok is false when a "**"
// is not the last segment.
func natsSubject(p Pattern) (string, bool) {
	parts := make([]string, len(p.segs))
	for i, g := range p.segs {
		switch g.kind {
		case segLit:
			parts[i] = g.lit
		case segOne:
			parts[i] = "*"
		case segMany:
			if i != len(p.segs)-1 {
				return "", false
			}
			parts[i] = ">"
		}
	}
	return strings.Join(parts, "."), true
}
