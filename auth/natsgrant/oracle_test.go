package natsgrant_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/eventhub/eventhub/acl"
	"github.com/eventhub/eventhub/auth/natsgrant"
	"github.com/eventhub/eventhub/facade"
)

// This file is the differential test's two sides: the ACL, which says what
// a principal may do over WebSocket and HTTP, and a model of what NATS lets
// a native client do with a compiled grant, evaluated with nats-server's
// own subject functions (and itself checked against a real server in
// TestOracleMatchesRealServer).

// scenario is one generated case: a policy, a catalogue, and the subjects
// operations are tried on.
type scenario struct {
	scopes   []acl.Rule
	own      bool // an account of its own (otherwise the shared one)
	cat      natsgrant.Catalogue
	subjects []string // concrete event subjects, in the hub's layout
	filters  []string // subscription subjects, wildcards among them
}

func (sc *scenario) String() string {
	var b strings.Builder
	for _, r := range sc.scopes {
		fmt.Fprintf(&b, "%s %s %v", r.Effect, r.Action, r.Topics)
		if len(r.Groups) > 0 {
			fmt.Fprintf(&b, " groups %v", r.Groups)
		}
		b.WriteString("; ")
	}
	fmt.Fprintf(&b, "own account %v; streams", sc.own)
	for _, s := range sc.cat.Streams {
		fmt.Fprintf(&b, " %s%v", s.Name, s.Subjects)
	}
	return b.String()
}

// segments topics are made of: few, so that generated rules and topics meet.
var segments = []string{"a", "b", "c"}

// spec is a scenario in text, as the fuzz corpus holds it:
//
//   - rules: one rule a line, "<allow|deny> <publish|subscribe|*>
//     <pattern>[,<pattern>…] [group]";
//   - topics: the catalogue's topics, space-separated, each with its own
//     stream, "+<group>" after one for a group on it; "fam=<segment>" puts
//     every topic under that first segment in one family stream;
//   - own: an account of its own; unlisted: the catalogue could not be
//     listed.
type spec struct {
	rules, topics string
	own, unlisted bool
}

// randomSpec makes a spec from r.
func randomSpec(r *rand.Rand) spec {
	topic := func() string {
		parts := make([]string, 1+r.IntN(4))
		for i := range parts {
			parts[i] = segments[r.IntN(len(segments))]
		}
		if r.IntN(5) == 0 {
			parts = append(parts, facade.DeadLetterSuffix)
		}
		return strings.Join(parts, ".")
	}
	var topics, cat []string
	for range 2 + r.IntN(5) {
		t := topic()
		topics = append(topics, t)
		for _, g := range []string{"g1", "ext"} {
			if r.IntN(3) == 0 {
				t += "+" + g
			}
		}
		cat = append(cat, t)
	}
	if r.IntN(3) == 0 {
		cat = append(cat, "fam="+segments[r.IntN(len(segments))])
	}
	pattern := func() string {
		var base []string
		if r.IntN(3) > 0 {
			base = strings.Split(topics[r.IntN(len(topics))], ".")
		} else {
			base = strings.Split(topic(), ".")
		}
		switch r.IntN(7) {
		case 0, 1: // "*" in some places
			for i := range base {
				if r.IntN(2) == 0 {
					base[i] = "*"
				}
			}
		case 2: // trailing "**"
			base = append(base[:r.IntN(len(base))+1], "**")
			if len(base) > 2 && r.IntN(2) == 0 {
				base[len(base)-2] = "*"
			}
		case 3: // leading wildcard
			lead := []string{"*", "**"}[r.IntN(2)]
			if r.IntN(3) == 0 {
				return lead
			}
			base[0] = lead
		case 4: // deeper than the topic, "*" at the end
			for range 1 + r.IntN(3) {
				base = append(base, "*")
			}
		}
		return strings.Join(base, ".")
	}
	var rules []string
	for i := range 1 + r.IntN(3) {
		effect := "allow"
		if i == 0 && r.IntN(8) == 0 {
			effect = "deny"
		}
		action := []string{"publish", "subscribe", "*"}[r.IntN(3)]
		pats := []string{pattern()}
		if r.IntN(3) == 0 {
			pats = append(pats, pattern())
		}
		rule := effect + " " + action + " " + strings.Join(pats, ",")
		if action != "publish" && r.IntN(4) == 0 {
			rule += " g1"
		}
		rules = append(rules, rule)
	}
	return spec{rules: strings.Join(rules, "\n"), topics: strings.Join(cat, " "), own: r.IntN(3) > 0, unlisted: r.IntN(10) == 0}
}

// scenario builds the scenario of a spec; ok is false for a spec that is
// not well formed.
func (sp spec) scenario() (sc *scenario, ok bool) {
	sc = &scenario{own: sp.own}
	for line := range strings.SplitSeq(sp.rules, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || len(f) > 4 {
			return nil, false
		}
		rule := acl.Rule{Effect: acl.Effect(f[0]), Action: acl.Action(f[1]), Topics: strings.Split(f[2], ",")}
		if len(f) == 4 {
			rule.Groups = []string{f[3]}
		}
		sc.scopes = append(sc.scopes, rule)
	}
	family := ""
	var topics []string
	groups := map[string][]string{}
	for _, e := range strings.Fields(sp.topics) {
		if fam, isFam := strings.CutPrefix(e, "fam="); isFam {
			family = fam
			continue
		}
		parts := strings.Split(e, "+")
		if facade.ValidateTopic(parts[0]) != nil {
			return nil, false
		}
		for _, g := range parts[1:] {
			// a consumer name
			if g == "" || strings.ContainsAny(g, ".*> \t") {
				return nil, false
			}
		}
		if !slices.Contains(topics, parts[0]) {
			topics = append(topics, parts[0])
		}
		groups[parts[0]] = append(groups[parts[0]], parts[1:]...)
	}
	inFamily := func(t string) bool { return family != "" && strings.HasPrefix(t, family+".") }
	famStream := natsgrant.Stream{Name: "FAM_" + family, Subjects: []string{family + ".>"}}
	for _, t := range topics {
		if inFamily(t) {
			for _, g := range groups[t] {
				famStream.Groups = append(famStream.Groups, natsgrant.GroupConsumer{Consumer: consumerName(g, t, true), Topic: t, Group: g})
			}
			continue
		}
		st := natsgrant.Stream{Name: streamName(t), Topic: t, Subjects: []string{t, t + "._k.*"}}
		for _, g := range groups[t] {
			st.Groups = append(st.Groups, natsgrant.GroupConsumer{Consumer: g, Topic: t, Group: g})
		}
		sc.cat.Streams = append(sc.cat.Streams, st)
	}
	if family != "" {
		sc.cat.Streams = append(sc.cat.Streams, famStream)
	}
	sc.cat.Listed = !sp.unlisted
	sc.cat.StreamFor = func(t string) (string, bool) {
		if inFamily(t) {
			return famStream.Name, true
		}
		return streamName(t), false
	}
	sc.cat.ConsumerName = consumerName

	// Subjects: the topics and their keyed events, deeper and shallower
	// ones, the patterns' own topics, and a topic under a first segment
	// the catalogue does not hold.
	add := func(s string) {
		if !slices.Contains(sc.subjects, s) {
			sc.subjects = append(sc.subjects, s)
		}
	}
	bases := append(slices.Clone(topics), "zz.a", "a")
	for _, r := range sc.scopes {
		for _, p := range r.Topics {
			t := strings.NewReplacer("**", "a.b", "*", "a").Replace(p)
			if facade.ValidateTopic(t) == nil {
				bases = append(bases, t)
			}
		}
	}
	for _, t := range bases {
		add(t)
		add(t + "._k.k1")
		add(t + "._k._k")
		add(t + ".x")
		add(t + ".dlq")
		add(t + ".x._k.k2")
		if i := strings.LastIndexByte(t, '.'); i > 0 {
			add(t[:i] + "._k." + t[i+1:])
		}
	}
	addFilter := func(f string) {
		if !slices.Contains(sc.filters, f) {
			sc.filters = append(sc.filters, f)
		}
	}
	for _, s := range sc.subjects {
		addFilter(s)
		toks := strings.Split(s, ".")
		for i := range toks {
			w := slices.Clone(toks)
			w[i] = "*"
			addFilter(strings.Join(w, "."))
			addFilter(strings.Join(append(slices.Clone(toks[:i]), ">"), "."))
		}
	}
	for _, rl := range sc.scopes {
		for _, p := range rl.Topics {
			addFilter(strings.ReplaceAll(p, "**", ">"))
		}
	}
	addFilter(">")
	addFilter("*.>")
	return sc, true
}

func streamName(topic string) string { return "EH_" + strings.ReplaceAll(topic, ".", "_") }

func consumerName(group, topic string, shared bool) string {
	if !shared {
		return group
	}
	return group + "_" + strings.ReplaceAll(topic, ".", "_")
}

// compiled is a scenario with its policy and grant.
type compiled struct {
	*scenario
	policy *acl.CompiledPolicy
	grant  natsgrant.Grant
	firsts []string
}

// compile compiles the scenario; ok is false when the policy is refused.
func (sc *scenario) compile() (*compiled, bool, error) {
	p, err := acl.CompilePolicy(acl.Policy{Rules: sc.scopes})
	if err != nil {
		return nil, false, nil // an invalid policy never reaches NATS
	}
	g, err := natsgrant.Compile(natsgrant.Input{Policy: p, Catalogue: sc.cat, OwnAccount: sc.own, Reserved: []string{"_EHUB_x.>", "_EHAPI.>"}})
	if errors.Is(err, natsgrant.ErrNotExpressible) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	c := &compiled{scenario: sc, policy: p, grant: g}
	for _, s := range sc.cat.Streams {
		for _, subj := range s.Subjects {
			if t, _, _ := strings.Cut(subj, "."); t != "*" && t != ">" && !slices.Contains(c.firsts, t) {
				c.firsts = append(c.firsts, t)
			}
		}
	}
	return c, true, nil
}

// --- the ACL's side ---

// eventTopic returns the topic of subject in the hub's layout ("T" or
// "T._k.<key>"); ok is false for a subject outside it.
func eventTopic(subject string) (topic string, ok bool) {
	toks := strings.Split(subject, ".")
	for i, t := range toks {
		if strings.HasPrefix(t, "_") {
			if t != "_k" || i != len(toks)-2 || i == 0 {
				return "", false
			}
			topic = strings.Join(toks[:i], ".")
			return topic, facade.ValidateTopic(topic) == nil
		}
	}
	return subject, facade.ValidateTopic(subject) == nil
}

// aclAllows is what the policy lets the principal do with the event
// subject over WebSocket and HTTP: publish it, or read it live (live
// reads have no group).
func (c *compiled) aclAllows(action acl.Action, subject string) bool {
	t, ok := eventTopic(subject)
	return ok && c.policy.Allowed(action, t, "")
}

// aclJetStream is what the policy allows of a JetStream API call on the
// catalogue's streams: reading a topic's own stream (info, gets, its
// consumers' list) and its events; the groups it may join (info, pull,
// ack); never making, changing or deleting streams or consumers.
func (c *compiled) aclJetStream(call jsCall) bool {
	switch call.kind {
	case "stream":
		return call.stream.Topic != "" && c.policy.Allowed(acl.ActionSubscribe, call.stream.Topic, "")
	case "get":
		return c.aclAllows(acl.ActionSubscribe, call.event)
	case "consumer":
		return c.policy.Allowed(acl.ActionSubscribe, call.group.Topic, call.group.Group)
	}
	return false
}

// jsCall is a JetStream API request.
type jsCall struct {
	subject string
	kind    string // "stream", "get", "consumer", "admin"
	event   string // the event subject of a "get"
	stream  natsgrant.Stream
	group   natsgrant.GroupConsumer
}

func (c *compiled) jsCalls() []jsCall {
	var out []jsCall
	for _, s := range c.cat.Streams {
		for _, api := range []string{"STREAM.INFO.", "DIRECT.GET.", "STREAM.MSG.GET.", "CONSUMER.NAMES.", "CONSUMER.LIST."} {
			out = append(out, jsCall{subject: "$JS.API." + api + s.Name, kind: "stream", stream: s})
		}
		for _, api := range []string{"STREAM.UPDATE.", "STREAM.DELETE.", "STREAM.PURGE.", "CONSUMER.CREATE.", "STREAM.MSG.DELETE."} {
			out = append(out, jsCall{subject: "$JS.API." + api + s.Name, kind: "admin", stream: s})
		}
		for _, subj := range c.subjects {
			// The events of the stream's topics.
			t, ok := eventTopic(subj)
			if ok && slices.ContainsFunc(s.Subjects, func(f string) bool { return server.SubjectMatchesFilter(t, f) }) {
				out = append(out, jsCall{subject: "$JS.API.DIRECT.GET." + s.Name + "." + subj, kind: "get", stream: s, event: subj})
				out = append(out, jsCall{subject: "$JS.API.CONSUMER.CREATE." + s.Name + ".x." + subj, kind: "admin", stream: s})
			}
		}
		for _, g := range s.Groups {
			for _, api := range []string{"$JS.API.CONSUMER.INFO.", "$JS.API.CONSUMER.MSG.NEXT.", "$JS.ACK."} {
				subj := api + s.Name + "." + g.Consumer
				if api == "$JS.ACK." {
					subj += ".1.7.7.1700000000000000000.0"
				}
				out = append(out, jsCall{subject: subj, kind: "consumer", stream: s, group: g})
			}
			for _, api := range []string{"CONSUMER.DELETE.", "CONSUMER.DURABLE.CREATE.", "CONSUMER.CREATE."} {
				out = append(out, jsCall{subject: "$JS.API." + api + s.Name + "." + g.Consumer, kind: "admin", stream: s, group: g})
			}
		}
	}
	return out
}

// --- NATS's side, as nats-server evaluates it ---

// literalMatch is how nats-server's sublist matches a subject against a
// permission entry: the subject's tokens, "*" and ">" among them, are
// literals, the entry's are wildcards. (A subscription to "orders.>" is
// checked as the literal token ">", which an entry "orders.*" accepts.)
func literalMatch(subject, entry string) bool {
	toks := strings.Split(subject, ".")
	for i, t := range toks {
		if t == "*" || t == ">" {
			toks[i] = "\x00" + t
		}
	}
	return server.SubjectMatchesFilter(strings.Join(toks, "."), entry)
}

func anyLiteralMatch(subject string, entries []string) bool {
	return slices.ContainsFunc(entries, func(e string) bool { return literalMatch(subject, e) })
}

func imported(subject string, imports []string) bool {
	return slices.ContainsFunc(imports, func(i string) bool { return server.SubjectMatchesFilter(subject, i) })
}

// natsPublish reports whether NATS carries a publish to subject from the
// client into the hub's account (where the streams and the hub are).
func (c *compiled) natsPublish(subject string) bool {
	p := c.grant.Publish
	if !anyLiteralMatch(subject, p.Allow) || anyLiteralMatch(subject, p.Deny) {
		return false
	}
	return !c.own || imported(subject, c.grant.Services)
}

// natsSubscribe reports whether NATS accepts the subscriptions of one
// connection, each subject with the queue of the same index, and whether
// it filters deliveries by the deny list (as it does once a wildcard or
// queue subscription overlaps a deny entry).
func (c *compiled) natsSubscribe(filters, queues []string) (accepted []bool, filtering bool) {
	s := c.grant.Subscribe
	accepted = make([]bool, len(filters))
	for i, f := range filters {
		accepted[i] = anyLiteralMatch(f, s.Allow) && !anyLiteralMatch(f, s.Deny)
		if accepted[i] && (queues[i] != "" || strings.ContainsAny(f, "*>")) &&
			slices.ContainsFunc(s.Deny, func(d string) bool { return server.SubjectsCollide(d, f) }) {
			filtering = true
		}
	}
	return accepted, filtering
}

// natsDelivers reports whether an event published on subject in the hub's
// account reaches an accepted subscription to filter.
func (c *compiled) natsDelivers(subject, filter string, filtering bool) bool {
	if !server.SubjectMatchesFilter(subject, filter) {
		return false
	}
	if filtering && anyLiteralMatch(subject, c.grant.Subscribe.Deny) {
		return false
	}
	return !c.own || imported(subject, c.grant.Streams)
}

// --- where the grant may be narrower than the policy ---

// narrowed reports whether the grant may refuse subject although the policy
// grants it, for a reason the package documents: a deny entry that also
// holds an event the policy refuses (NATS applies every deny to every
// subscription), the keyed events of topics a rule ending in "*" reaches
// (reads), and in an own account topics under first tokens the catalogue
// did not hold when the client connected.
func (c *compiled) narrowed(action acl.Action, subject string, deny, allow []string) bool {
	if c.own && c.leading() {
		if t, _, _ := strings.Cut(subject, "."); !slices.Contains(c.firsts, t) {
			return true
		}
	}
	for _, d := range deny {
		if literalMatch(subject, d) && c.needed(action, d, allow) {
			return true
		}
	}
	if action == acl.ActionSubscribe && strings.Contains(subject, "._k.") {
		topic, _ := eventTopic(subject)
		for _, a := range allow {
			if strings.HasSuffix(a, ".*") && literalMatch(topic, a) {
				return true
			}
		}
	}
	return false
}

func (c *compiled) leading() bool {
	for _, r := range c.scopes {
		for _, p := range r.Topics {
			if p == "*" || p == "**" || strings.HasPrefix(p, "*.") || strings.HasPrefix(p, "**.") {
				return true
			}
		}
	}
	return false
}

// needed reports whether deny entry d holds an event that a subscription
// the allow entries accept would reach and the policy refuses: a witness
// made by filling its wildcards.
func (c *compiled) needed(action acl.Action, d string, allow []string) bool {
	fills := [][]string{{}}
	for _, t := range strings.Split(d, ".") {
		var opts []string
		switch t {
		case "*":
			opts = []string{"zz", "_k", "a", "b"}
		case ">":
			opts = []string{"zz", "zz.zz", "_k.zz", "zz._k.zz"}
		default:
			opts = []string{t}
		}
		var next [][]string
		for _, f := range fills {
			for _, o := range opts {
				next = append(next, append(slices.Clone(f), o))
			}
		}
		fills = next
	}
	for _, f := range fills {
		w := strings.Join(f, ".")
		if _, ok := eventTopic(w); ok && reachable(w, allow) && !c.aclAllows(action, w) {
			return true
		}
	}
	return false
}

// reachable reports whether some subscription the allow entries accept
// matches subject: the subject itself, or one ending in ">" (which an
// entry's "*" accepts as a literal token).
func reachable(subject string, allow []string) bool {
	if anyLiteralMatch(subject, allow) {
		return true
	}
	toks := strings.Split(subject, ".")
	for i := range toks {
		if anyLiteralMatch(strings.Join(append(slices.Clone(toks[:i]), ">"), "."), allow) {
			return true
		}
	}
	return false
}

// --- the check ---

// check returns the first difference between the grant and the ACL ("" for
// none) and the number of operations checked.
func (c *compiled) check() (diff string, ops int) {
	pub, sub := c.grant.Publish, c.grant.Subscribe
	for _, s := range c.subjects {
		ops += 2
		// publish
		nats, acl0 := c.natsPublish(s), c.aclAllows(acl.ActionPublish, s)
		if nats && !acl0 {
			return fmt.Sprintf("publish %s: NATS carries it, the policy refuses it", s), ops
		}
		if acl0 && !nats && !c.narrowed(acl.ActionPublish, s, pub.Deny, pub.Allow) {
			return fmt.Sprintf("publish %s: the policy allows it, NATS refuses it", s), ops
		}
		// a live read with a subscription to the subject itself
		acc, filtering := c.natsSubscribe([]string{s}, []string{""})
		nats = acc[0] && c.natsDelivers(s, s, filtering)
		acl0 = c.aclAllows(acl.ActionSubscribe, s)
		if nats && !acl0 {
			return fmt.Sprintf("subscribe %s: NATS delivers it, the policy refuses it", s), ops
		}
		if acl0 && !nats && !c.narrowed(acl.ActionSubscribe, s, sub.Deny, sub.Allow) {
			return fmt.Sprintf("subscribe %s: the policy allows it, NATS refuses it", s), ops
		}
	}
	// Every filter, with and without a queue group: nothing the policy
	// refuses is delivered; a wildcard subscription the policy allows whole
	// is accepted.
	for _, q := range []string{"", "g1"} {
		for _, f := range c.filters {
			acc, filtering := c.natsSubscribe([]string{f}, []string{q})
			if !acc[0] {
				ops++
				if pat, ok := topicPatternOf(f); ok && c.policy.AllowedAll(acl.ActionSubscribe, pat, "") &&
					!(c.own && c.leading()) && !c.narrowed(acl.ActionSubscribe, f, c.grant.Subscribe.Deny, c.grant.Subscribe.Allow) {
					return fmt.Sprintf("subscribe %q queue %q: the policy allows it whole, NATS refuses it", f, q), ops
				}
				continue
			}
			for _, s := range c.subjects {
				ops++
				if c.natsDelivers(s, f, filtering) && !c.aclAllows(acl.ActionSubscribe, s) {
					return fmt.Sprintf("subscribe %q queue %q: NATS delivers %s, the policy refuses it", f, q, s), ops
				}
			}
		}
	}
	for _, call := range c.jsCalls() {
		ops++
		nats, acl0 := c.natsPublish(call.subject), c.aclJetStream(call)
		if nats && !acl0 {
			return fmt.Sprintf("JetStream %s: NATS carries it, the policy refuses it", call.subject), ops
		}
		if acl0 && !nats && c.jsExpected(call) {
			return fmt.Sprintf("JetStream %s: the policy allows it, NATS refuses it", call.subject), ops
		}
	}
	return "", ops
}

// topicPatternOf returns the topic pattern of a subscription subject:
// ">" is "**"; ok is false when it names no topics (a "_" token).
func topicPatternOf(filter string) (string, bool) {
	toks := strings.Split(filter, ".")
	for i, t := range toks {
		switch {
		case t == ">":
			toks[i] = "**"
		case strings.HasPrefix(t, "_"):
			return "", false
		}
	}
	return strings.Join(toks, "."), true
}

// jsExpected reports whether the grant must allow a JetStream call the
// policy allows: with the catalogue listed and no rule beginning with a
// wildcard in a shared account, the streams of the topics and the groups
// it may join; direct gets on a family stream only for topics a rule
// names.
func (c *compiled) jsExpected(call jsCall) bool {
	if !c.cat.Listed || (!c.own && c.leading()) {
		return false
	}
	if call.kind == "get" && call.stream.Topic == "" {
		t, _ := eventTopic(call.event)
		return slices.ContainsFunc(c.grant.SubscribeTopics, func(e string) bool { return e == t }) ||
			slices.ContainsFunc(c.grant.PublishTopics, func(e string) bool { return e == t })
	}
	if c.own && c.leading() {
		t := call.stream.Topic
		if call.kind == "consumer" {
			t = call.group.Topic
		}
		if f, _, _ := strings.Cut(t, "."); t == "" || !slices.Contains(c.firsts, f) {
			return false
		}
	}
	return true
}
