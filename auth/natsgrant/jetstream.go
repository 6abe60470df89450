package natsgrant

import (
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/eventhub/eventhub/acl"
)

// Catalogue is a snapshot of where the hub's topics live.
type Catalogue struct {
	// Listed is false when the streams could not be listed: no JetStream
	// API is then granted, and rules beginning with a wildcard reach no
	// topic.
	Listed bool
	// Streams are the streams holding the policy's topics (every stream,
	// for a policy with a rule beginning with a wildcard), with their
	// groups where a subscribe rule reaches them.
	Streams []Stream
	// StreamFor names the stream the hub would create for topic; shared is
	// true for a configured family stream. Nil: none is granted before it
	// exists.
	StreamFor func(topic string) (name string, shared bool)
	// ConsumerName names the durable consumer of group on topic, on the
	// topic's own stream or on a shared one.
	ConsumerName func(group, topic string, shared bool) string
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
// pulling (MSG.NEXT) and acking. Never creating, updating or deleting one:
// a consumer's configuration is the client's to choose (a push consumer
// delivers to any subject it names, into other topics' streams or inboxes,
// and outlives the token that made it), and deleting a hub group destroys
// its cursor. Groups are created through the hub, which validates their
// configuration.
func (g *jsGrants) consumer(stream, name string) {
	g.add(
		jsAPI+"CONSUMER.INFO."+stream+"."+name,
		jsAPI+"CONSUMER.MSG.NEXT."+stream+"."+name,
		jsAck+stream+"."+name+".>",
		jsAck+"*.*."+stream+"."+name+".>",
	)
}

// jetStream returns the JetStream API subjects a principal with policy p
// may publish to, given its topic entries (pub, and sub whose entries may
// carry a " group" suffix):
//
//   - "$JS.API.STREAM.NAMES" (streams by subject, which js.Publish callers
//     and nats.go's lookups use);
//   - on the hub's own stream of a topic it may read (any group): the
//     stream's info, direct gets ("$JS.API.DIRECT.GET.<stream>[.<subject>]"),
//     message get, the list of its consumers, and the groups on it (info,
//     pull, ack): every pull consumer with acks, the hub's and those made
//     outside it, not the hub's ordered consumers of live sessions and
//     replays, whose events the client would take;
//   - on such a stream with group-restricted rules: the consumers of the
//     allowed groups only (info, pull, ack);
//   - on a stream holding several topics: last-by-subject direct gets of
//     the topics it names, and the hub groups on the stream it may join;
//     not the stream's info, which lists every subject (other topics, and
//     the keys of their events).
//
// No consumer is created, updated or deleted natively (see consumer). Nil
// when nothing can be granted: the catalogue was not listed, or an entry
// begins with a wildcard (it would cover the JetStream API itself, which
// then stays denied whole; an own account expands such entries first).
func jetStream(p *acl.CompiledPolicy, cat Catalogue, pub, sub []string) []string {
	if !cat.Listed {
		return nil
	}
	var filters []string
	for _, e := range slices.Concat(pub, sub) {
		if LeadingWildcard(e) {
			return nil
		}
		if s, _, _ := strings.Cut(e, " "); !slices.Contains(filters, s) {
			filters = append(filters, s)
		}
	}
	if len(filters) == 0 {
		return nil
	}
	var order []*Stream
	put := func(s *Stream) {
		if !slices.ContainsFunc(order, func(o *Stream) bool { return o.Name == s.Name }) {
			order = append(order, s)
		}
	}
	for _, f := range filters {
		found := false
		for i := range cat.Streams {
			if s := &cat.Streams[i]; collides(s.Subjects, f) {
				put(s)
				found = true
			}
		}
		// A topic the policy names whose stream does not exist yet: grant
		// the stream the hub will create for it.
		if !found && cat.StreamFor != nil && !strings.ContainsAny(f, "*>") {
			name, shared := cat.StreamFor(f)
			if shared {
				put(&Stream{Name: name})
			} else {
				put(&Stream{Name: name, Topic: f})
			}
		}
	}
	var g jsGrants
	g.add(jsAPI + "STREAM.NAMES")
	for _, s := range order {
		if s.Topic != "" {
			ownStreamGrants(&g, cat, p, s)
		} else {
			sharedStreamGrants(&g, cat, p, s, filters)
		}
	}
	return g.pub
}

// collides reports whether one of subjects overlaps filter.
func collides(subjects []string, filter string) bool {
	return slices.ContainsFunc(subjects, func(s string) bool { return server.SubjectsCollide(s, filter) })
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

func consumerName(cat Catalogue, group, topic string, shared bool) (string, bool) {
	if cat.ConsumerName == nil {
		return "", false
	}
	return cat.ConsumerName(group, topic, shared), true
}

func ownStreamGrants(g *jsGrants, cat Catalogue, p *acl.CompiledPolicy, s *Stream) {
	t := s.Topic
	// "" stands for every group no rule names; expressible policies have
	// no deny that a later allow overlaps, so no named group is carved out
	// of an any-group grant.
	if p.Allowed(acl.ActionSubscribe, t, "") {
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
	for _, grp := range groupsOf(p) {
		if name, ok := consumerName(cat, grp, t, false); ok && p.Allowed(acl.ActionSubscribe, t, grp) {
			g.consumer(s.Name, name)
		}
	}
}

func sharedStreamGrants(g *jsGrants, cat Catalogue, p *acl.CompiledPolicy, s *Stream, filters []string) {
	named := groupsOf(p)
	for _, t := range filters {
		if strings.ContainsAny(t, "*>") {
			continue
		}
		if p.Allowed(acl.ActionSubscribe, t, "") {
			g.add(jsAPI+"DIRECT.GET."+s.Name+"."+t, jsAPI+"DIRECT.GET."+s.Name+"."+t+"._k.*")
		}
		for _, grp := range named {
			if name, ok := consumerName(cat, grp, t, true); ok && p.Allowed(acl.ActionSubscribe, t, grp) {
				g.consumer(s.Name, name)
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
