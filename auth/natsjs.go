package auth

import (
	"context"
	"slices"
	"strings"

	"github.com/eventhub/eventhub/acl"
	"github.com/eventhub/eventhub/auth/natsgrant"
)

// Directory tells native-client authentication where topics live, so that
// it can grant JetStream API subjects by stream and consumer name. The hub's
// bus implements it (hub wires it with [NATS.SetDirectory]).
type Directory interface {
	// TopicStreams lists the streams whose subjects overlap filter (a NATS
	// subject, wildcards allowed); with groups, the groups on each too.
	TopicStreams(ctx context.Context, filter string, groups bool) ([]Stream, error)
	// StreamNameFor is the stream the hub would create for topic; shared
	// is true for a configured family stream.
	StreamNameFor(topic string) (name string, shared bool)
	// ConsumerName is the durable consumer of group on topic, on the
	// topic's own stream or on a shared one.
	ConsumerName(group, topic string, shared bool) string
}

// Stream is a stream that holds topics.
type Stream struct {
	Name string
	// Topic is set when the stream is the hub's own stream of one topic
	// (the topic and its keyed subjects); "" when it holds several.
	Topic string
	// Groups are the groups found on the stream: the hub's on a shared
	// stream; on a topic's own stream every pull consumer with acks (not
	// the hub's ordered consumers of live sessions and replays).
	Groups []GroupConsumer
	// Subjects are the stream's subjects.
	Subjects []string
}

// GroupConsumer is the consumer of a group: one the hub made, or, on a
// topic's own stream, a pull consumer with acks made outside it (its name
// is then its group's).
type GroupConsumer struct{ Consumer, Topic, Group string }

// JetStream API subjects (nats-server's jetstream_api.go).
const (
	jsAPI = "$JS.API."
	// Acks of a consumer's messages: "$JS.ACK.<stream>.<consumer>.…" (v1)
	// or "$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.…" (v2).
	jsAck = "$JS.ACK."
)

// jsGrants collects the JetStream API subjects granted to one principal.
type jsGrants struct {
	pub  []string
	seen map[string]bool
}

func (g *jsGrants) add(subjects ...string) {
	if g.seen == nil {
		g.seen = map[string]bool{}
	}
	for _, s := range subjects {
		if !g.seen[s] {
			g.seen[s] = true
			g.pub = append(g.pub, s)
		}
	}
}

// consumer grants the use of one consumer: its info (binding to it),
// pulling (MSG.NEXT) and acking. Never creating, updating or deleting one: a consumer's configuration is
// the client's to choose (a push consumer delivers to any subject it names,
// into other topics' streams or inboxes, and outlives the token that made
// it), and deleting a hub group destroys its cursor. Groups are created
// through the hub, which validates their configuration.
func (g *jsGrants) consumer(stream, name string) {
	g.add(
		jsAPI+"CONSUMER.INFO."+stream+"."+name,
		jsAPI+"CONSUMER.MSG.NEXT."+stream+"."+name,
		jsAck+stream+"."+name+".>",
		jsAck+"*.*."+stream+"."+name+".>",
	)
}

// jetStreamGrants returns the JetStream API subjects a principal with
// policy p may publish to, given its NATS allow lists (pub, and sub whose
// entries may carry a " queue" suffix):
//
//   - "$JS.API.STREAM.NAMES" (streams by subject, which js.Publish callers
//     and nats.go's lookups use);
//   - on the hub's own stream of a topic it may subscribe to (any group):
//     the stream's info, direct gets ("$JS.API.DIRECT.GET.<stream>[.<subject>]"),
//     message get, the list of its consumers, and the groups on it when
//     the client connects (info, pull, ack): every pull consumer with acks,
//     the hub's and those made outside it, not the hub's ordered consumers of
//     live sessions and replays, whose events the client would take;
//   - on such a stream with group-restricted rules: the consumers of the
//     allowed groups only (info, pull, ack);
//   - on a stream holding several topics: last-by-subject direct gets of
//     the topics it names, and the hub groups on the stream it may join;
//     not the stream's info, which lists every subject (other topics, and
//     the keys of their events).
//
// No consumer is created, updated or deleted natively (see consumer).
//
// ok is false when no JetStream subject can be granted: a policy with an
// allow entry that begins with a wildcard ("**", "*.x") would cover the
// JetStream API itself, which then stays denied whole (an account of its
// own expands such entries first: see natsgrant.Input).
func jetStreamGrants(ctx context.Context, dir Directory, p *acl.CompiledPolicy, pub, sub []string) (grants []string, ok bool, err error) {
	var filters []string
	read := map[string]bool{} // filters of subscribe rules: their groups are listed
	for i, e := range append(slices.Clone(pub), sub...) {
		if natsgrant.LeadingWildcard(e) {
			return nil, false, nil
		}
		s, _, _ := strings.Cut(e, " ")
		if !slices.Contains(filters, s) {
			filters = append(filters, s)
		}
		if i >= len(pub) {
			read[s] = true
		}
	}
	if dir == nil || len(filters) == 0 {
		return nil, true, nil
	}
	streams := map[string]*Stream{}
	var order []string
	put := func(s Stream) {
		prev, seen := streams[s.Name]
		switch {
		case !seen:
			order = append(order, s.Name)
			streams[s.Name] = &s
		case prev.Groups == nil:
			// found again by a subscribe rule, with its groups
			prev.Groups = s.Groups
		}
	}
	for _, f := range filters {
		found, err := dir.TopicStreams(ctx, f, read[f])
		if err != nil {
			return nil, false, err
		}
		for _, s := range found {
			put(s)
		}
		// A topic the policy names whose stream does not exist yet: grant
		// the stream the hub will create for it.
		if len(found) == 0 && !strings.ContainsAny(f, "*>") {
			name, shared := dir.StreamNameFor(f)
			if shared {
				put(Stream{Name: name})
			} else {
				put(Stream{Name: name, Topic: f})
			}
		}
	}
	var g jsGrants
	g.add(jsAPI + "STREAM.NAMES")
	for _, name := range order {
		s := streams[name]
		if s.Topic != "" {
			ownStreamGrants(&g, dir, p, s)
		} else {
			sharedStreamGrants(&g, dir, p, s, filters)
		}
	}
	return g.pub, true, nil
}

// groupsOf returns the groups the policy names for subscribe rules.
func groupsOf(p *acl.CompiledPolicy) []string {
	var out []string
	for _, r := range p.Policy().Rules {
		for _, g := range r.Groups {
			if g != "*" && !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	return out
}

func ownStreamGrants(g *jsGrants, dir Directory, p *acl.CompiledPolicy, s *Stream) {
	t := s.Topic
	// "" stands for every group no rule names; expressible policies have
	// no deny that a later allow overlaps, so no named group is carved out
	// of an any-group grant.
	read := p.Allowed(acl.ActionSubscribe, t, "")
	var groups []string
	for _, grp := range groupsOf(p) {
		if p.Allowed(acl.ActionSubscribe, t, grp) {
			groups = append(groups, grp)
		}
	}
	if read {
		// The info lists the stream's subjects: the topic's event keys.
		g.add(
			jsAPI+"STREAM.INFO."+s.Name,
			jsAPI+"DIRECT.GET."+s.Name,
			jsAPI+"DIRECT.GET."+s.Name+".>",
			jsAPI+"STREAM.MSG.GET."+s.Name,
			jsAPI+"CONSUMER.NAMES."+s.Name,
			jsAPI+"CONSUMER.LIST."+s.Name,
		)
		// Its groups, not every consumer: pulling from the hub's ordered
		// consumers would take events from other clients' live sessions.
		for _, c := range s.Groups {
			if p.Allowed(acl.ActionSubscribe, t, c.Group) {
				g.consumer(s.Name, c.Consumer)
			}
		}
	}
	for _, grp := range groups {
		g.consumer(s.Name, dir.ConsumerName(grp, t, false))
	}
}

func sharedStreamGrants(g *jsGrants, dir Directory, p *acl.CompiledPolicy, s *Stream, filters []string) {
	named := groupsOf(p)
	for _, t := range filters {
		if strings.ContainsAny(t, "*>") {
			continue
		}
		if p.Allowed(acl.ActionSubscribe, t, "") {
			g.add(jsAPI+"DIRECT.GET."+s.Name+"."+t, jsAPI+"DIRECT.GET."+s.Name+"."+t+"._k.*")
		}
		for _, grp := range named {
			if p.Allowed(acl.ActionSubscribe, t, grp) {
				g.consumer(s.Name, dir.ConsumerName(grp, t, true))
			}
		}
	}
	// Groups the hub made on the stream, whatever rule allows them.
	for _, c := range s.Groups {
		if p.Allowed(acl.ActionSubscribe, c.Topic, c.Group) {
			g.consumer(s.Name, c.Consumer)
		}
	}
}
