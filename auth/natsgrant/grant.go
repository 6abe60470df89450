// Package natsgrant compiles a principal's topic policy into what NATS
// enforces for its native clients: the user's publish and subscribe
// permissions and the imports of its account. It is pure: no I/O, no NATS
// server; it reuses nats-server's own subject matching.
//
// The input is the policy and a snapshot of the hub's catalogue (its
// streams, their subjects and groups, and how the hub names streams and
// groups); the output is one [Grant]. What a grant lets a native client do is what the policy lets the
// same principal do over WebSocket and HTTP, never more: where NATS cannot
// express a rule exactly, the grant is narrower (see [Compile]) or the
// policy is refused ([ErrNotExpressible]).
//
// # Subjects
//
// An event of topic T is stored on subject T, or "T._k.<key token>" when it
// has a key. Topic segments never begin with "_", so "_k" marks the key;
// a subject whose tokens do not follow this layout carries no event.
package natsgrant

import (
	"errors"
	"fmt"
	"slices"

	"github.com/eventhub/eventhub/acl"
)

// ErrNotExpressible: NATS permissions and account imports cannot hold the
// policy without granting more than it does.
var ErrNotExpressible = errors.New("natsgrant: policy not expressible as NATS permissions")

// systemSubjects are never granted to native clients, whatever their
// policy says: the JetStream and KV APIs, the system account, and other
// accounts' subjects (the JetStream API subjects of a grant excepted).
func systemSubjects() []string {
	return []string{"$JS.>", "$JSC.>", "$KV.>", "$O.>", "$SYS.>", "$NRG.>", "$G.>"}
}

// inbox is the clients' own reply subjects.
const inbox = "_INBOX.>"

// Input is what a grant is compiled from.
type Input struct {
	// Policy is the principal's policy (nil grants nothing).
	Policy *acl.CompiledPolicy
	// Catalogue is a snapshot of the hub's streams. In an own account, a
	// rule beginning with a wildcard ("**", "*.x") reaches the topics under
	// the first tokens of its streams' subjects: an account cannot import
	// ">" from the hub's account, which holds its inboxes and the
	// JetStream API beside the topics.
	Catalogue Catalogue
	// OwnAccount is set when the principal gets a NATS account of its own
	// that imports what it is granted; otherwise it shares the hub's
	// account with subject permissions only.
	OwnAccount bool
	// Reserved are subjects no native client may publish or subscribe to
	// (the hub's own inboxes and API), each denied in both directions.
	Reserved []string
}

// Permission is a NATS subject permission: Allow and Deny lists.
type Permission struct {
	Allow []string
	Deny  []string
}

// Grant is everything NATS enforces for one principal's native clients.
type Grant struct {
	Publish   Permission
	Subscribe Permission
	// PublishTopics and SubscribeTopics are the topic subjects the policy
	// allows, leading wildcards expanded in an own account; a subscribe
	// entry restricted to groups carries " <group>" (such rules grant the
	// groups' durable consumers, never live reads).
	PublishTopics   []string
	SubscribeTopics []string
	// JetStream are the JetStream API subjects granted (also in
	// Publish.Allow).
	JetStream []string
	// Services and Streams are the subjects an own account imports from
	// the hub's account: requests and publishes go out through service
	// imports, live events come in through stream imports. Empty without
	// an own account.
	Services []string
	Streams  []string
}

// Topics returns the topic subjects the policy allows to publish and to
// subscribe to, as in [Grant]: the catalogue a grant needs holds the
// streams of these subjects.
func Topics(in Input) (pub, sub []string, err error) {
	pub, sub, err = topicEntries(in.Policy)
	if err != nil {
		return nil, nil, err
	}
	if slices.ContainsFunc(pub, systemEntry) || slices.ContainsFunc(sub, systemEntry) {
		return nil, nil, notExpressible("an entry names subjects outside the hub's topics")
	}
	if in.OwnAccount {
		var subjects []string
		for _, st := range in.Catalogue.Streams {
			subjects = append(subjects, st.Subjects...)
		}
		firsts := firstTokens(subjects)
		pub, sub = expandLeading(pub, firsts), expandLeading(sub, firsts)
	}
	return pub, sub, nil
}

// Compile compiles a grant. Beside the topics the policy allows, a native
// client gets:
//
//   - the keyed subjects of each topic it may publish to or read
//     ("T._k.*"), except, for reading, of topics a rule ending in "*"
//     reaches ("orders.*"): NATS lets a client subscribe to "orders.>"
//     under such a rule, and cannot tell those keyed subjects from deeper
//     topics, which it then must deny;
//   - no keyed subject of a topic its rules do not reach, though a rule
//     with more tokens ("secret.*.*.*") matches the keyed subjects of a
//     shorter topic ("secret.data._k.k"): those are denied;
//   - no live reads from a rule restricted to groups (those grant the
//     groups' durable consumers, through the JetStream API);
//   - the JetStream API on the streams and groups of its topics (see
//     jetStream);
//   - its own reply inboxes (_INBOX.>), and nothing else of the system
//     subjects ($JS, $KV, $SYS…) or of Reserved.
//
// A deny needed for one rule can take back what another rule grants
// (NATS applies every deny to every subscription); the grant is then
// narrower than the policy, never wider. Errors wrap ErrNotExpressible:
// a "**" that is not last, a deny rule that a later allow overlaps, an
// entry naming "$" or "_" subjects, a bare "*" in a shared account, and in
// an own account entries that overlap without one covering the other.
func Compile(in Input) (Grant, error) {
	pub, sub, err := Topics(in)
	if err != nil {
		return Grant{}, err
	}
	g := Grant{PublishTopics: pub, SubscribeTopics: sub}
	pubAllow, pubDeny, err := permissions(in.Policy, acl.ActionPublish, pub)
	if err != nil {
		return Grant{}, err
	}
	live := slices.DeleteFunc(slices.Clone(sub), hasQueue)
	subAllow, subDeny, err := permissions(in.Policy, acl.ActionSubscribe, live)
	if err != nil {
		return Grant{}, err
	}
	system := systemSubjects()
	if g.JetStream = jetStream(in.Policy, in.Catalogue, pub, sub); len(g.JetStream) > 0 {
		// The allow list names every JetStream subject granted; no other
		// entry reaches $JS (none begins with a wildcard).
		system = slices.DeleteFunc(system, func(s string) bool { return s == "$JS.>" })
	}
	g.Publish = Permission{
		Allow: append(pubAllow, g.JetStream...),
		Deny:  slices.Concat(system, []string{inbox}, in.Reserved, pubDeny),
	}
	g.Subscribe = Permission{
		Allow: append(subAllow, inbox),
		Deny:  slices.Concat(systemSubjects(), in.Reserved, subDeny),
	}
	if in.OwnAccount {
		if g.Services, err = narrowImports(g.Publish.Allow); err != nil {
			return Grant{}, err
		}
		if g.Streams, err = narrowImports(subAllow); err != nil {
			return Grant{}, err
		}
	}
	return g, nil
}

// notExpressible returns an error wrapping ErrNotExpressible that says why.
func notExpressible(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrNotExpressible}, args...)...)
}
