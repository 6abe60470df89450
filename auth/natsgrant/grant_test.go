package natsgrant_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/eventhub/eventhub/acl"
	"github.com/eventhub/eventhub/auth/natsgrant"
)

func policy(t *testing.T, scopes ...string) *acl.CompiledPolicy {
	t.Helper()
	p, err := acl.ScopesToPolicy(scopes)
	if err != nil {
		t.Fatal(err)
	}
	c, err := acl.CompilePolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ownStream(topic string, groups ...string) natsgrant.Stream {
	s := natsgrant.Stream{Name: streamName(topic), Topic: topic, Subjects: []string{topic, topic + "._k.*"}}
	for _, g := range groups {
		s.Groups = append(s.Groups, natsgrant.GroupConsumer{Consumer: g, Topic: topic, Group: g})
	}
	return s
}

func catalogueOf(streams ...natsgrant.Stream) natsgrant.Catalogue {
	return natsgrant.Catalogue{
		Listed:       true,
		Streams:      streams,
		StreamFor:    func(t string) (string, bool) { return streamName(t), false },
		ConsumerName: consumerName,
	}
}

// TestCompile: what each shape of rule becomes.
func TestCompile(t *testing.T) {
	cases := []struct {
		name      string
		policy    *acl.CompiledPolicy
		cat       natsgrant.Catalogue
		shared    bool
		pubAllow  []string // entries Publish.Allow must hold
		pubDeny   []string // entries Publish.Deny must hold
		subAllow  []string
		subDeny   []string
		notIn     []string // entries no allow list may hold
		services  []string // exactly, for an own account
		streams   []string
		jetStream []string // entries JetStream must hold
	}{{
		name:     "a topic and its keyed events",
		policy:   policy(t, "subscribe:orders.new", "publish:orders.new"),
		cat:      catalogueOf(ownStream("orders.new", "g1")),
		pubAllow: []string{"orders.new", "orders.new._k.*"},
		subAllow: []string{"orders.new", "orders.new._k.*", "_INBOX.>"},
		subDeny:  []string{"orders.new._k.*.>"},
		services: []string{"$JS.ACK.EH_orders_new.g1.>", "$JS.API.CONSUMER.INFO.EH_orders_new.g1", "$JS.API.CONSUMER.LIST.EH_orders_new", "$JS.API.CONSUMER.MSG.NEXT.EH_orders_new.g1",
			"$JS.API.CONSUMER.NAMES.EH_orders_new", "$JS.API.DIRECT.GET.EH_orders_new", "$JS.API.DIRECT.GET.EH_orders_new.>",
			"$JS.API.STREAM.INFO.EH_orders_new", "$JS.API.STREAM.MSG.GET.EH_orders_new", "$JS.API.STREAM.NAMES",
			"orders.new", "orders.new._k.*"},
		streams:   []string{"orders.new", "orders.new._k.*"},
		jetStream: []string{"$JS.API.CONSUMER.MSG.NEXT.EH_orders_new.g1"},
	}, {
		name:     "a rule ending in * reads no deeper subject",
		policy:   policy(t, "subscribe:orders.*"),
		subAllow: []string{"orders.*"},
		subDeny:  []string{"orders.*.*", "orders.*.*.>"},
		notIn:    []string{"orders.*._k.*"},
		streams:  []string{"orders.*"},
	}, {
		name:     "a deeper rule does not reach a shorter topic's keyed events",
		policy:   policy(t, "subscribe:secret.*.*.*", "publish:secret.*.*.*"),
		pubAllow: []string{"secret.*.*.*", "secret.*.*.*._k.*"},
		pubDeny:  []string{"secret.*._k.*"},
		subAllow: []string{"secret.*.*.*"},
		subDeny:  []string{"secret.*._k.*", "secret.*.*.*.*", "secret.*.*.*.*.>"},
		services: []string{"secret.*.*.*", "secret.*.*.*._k.*"},
		streams:  []string{"secret.*.*.*"},
	}, {
		name:     "the same for a one-segment topic",
		policy:   policy(t, "subscribe:solo.*.*"),
		subDeny:  []string{"solo._k.*"},
		streams:  []string{"solo.*.*"},
		subAllow: []string{"solo.*.*"},
	}, {
		name:     "a shorter topic the policy grants keeps its keyed events",
		policy:   policy(t, "subscribe:secret.*.*.*", "subscribe:secret.*"),
		subAllow: []string{"secret.*.*.*", "secret.*"},
		notIn:    []string{"secret.*._k.*"},
		streams:  []string{"secret.*", "secret.*.*.*"},
	}, {
		name:     "** does not reach the keyed events of the topic it extends",
		policy:   policy(t, "subscribe:orders.**"),
		subAllow: []string{"orders.>"},
		subDeny:  []string{"orders._k.*"},
		streams:  []string{"orders.>"},
	}, {
		name:     "** and the topic itself",
		policy:   policy(t, "subscribe:orders.**", "subscribe:orders"),
		subAllow: []string{"orders.>", "orders", "orders._k.*"},
		streams:  []string{"orders", "orders.>"},
	}, {
		name:     "* and ** together: ** covers what * denies",
		policy:   policy(t, "subscribe:orders.*", "subscribe:orders.**"),
		subAllow: []string{"orders.*", "orders.>"},
		subDeny:  []string{"orders._k.*"},
		streams:  []string{"orders.>"},
	}, {
		name: "a rule restricted to groups gives no live reads, only its groups",
		policy: func() *acl.CompiledPolicy {
			p, err := acl.CompilePolicy(acl.Policy{Rules: []acl.Rule{{Effect: acl.EffectAllow, Action: acl.ActionSubscribe, Topics: []string{"billing.a"}, Groups: []string{"billing"}}}})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}(),
		cat:       catalogueOf(ownStream("billing.a", "billing", "other")),
		subAllow:  []string{"_INBOX.>"},
		notIn:     []string{"billing.a", "billing.a billing", "$JS.API.STREAM.INFO.EH_billing_a", "$JS.API.CONSUMER.INFO.EH_billing_a.other"},
		jetStream: []string{"$JS.API.CONSUMER.MSG.NEXT.EH_billing_a.billing", "$JS.ACK.EH_billing_a.billing.>"},
	}, {
		name:     "leading wildcards in an own account reach the catalogue's first tokens",
		policy:   policy(t, "subscribe:**", "publish:*.x"),
		cat:      catalogueOf(ownStream("a"), ownStream("b.c")),
		subAllow: []string{"a", "a.>", "b", "b.>"},
		pubAllow: []string{"a.x", "b.x"},
		notIn:    []string{">", "*.x"},
	}, {
		name:     "leading wildcards in a shared account: no JetStream",
		policy:   policy(t, "subscribe:*.x"),
		cat:      catalogueOf(ownStream("a.x")),
		shared:   true,
		subAllow: []string{"*.x"},
		pubDeny:  []string{"$JS.>"},
		notIn:    []string{"$JS.API.STREAM.NAMES"},
	}, {
		name:     "an unlisted catalogue grants no JetStream",
		policy:   policy(t, "subscribe:orders.new"),
		cat:      natsgrant.Catalogue{Streams: []natsgrant.Stream{ownStream("orders.new", "g1")}},
		pubDeny:  []string{"$JS.>"},
		notIn:    []string{"$JS.API.STREAM.NAMES"},
		subAllow: []string{"orders.new"},
	}, {
		name:     "a topic without a stream yet gets the stream the hub will make",
		policy:   policy(t, "subscribe:orders.new"),
		cat:      catalogueOf(),
		pubAllow: []string{"$JS.API.STREAM.INFO.EH_orders_new", "$JS.API.DIRECT.GET.EH_orders_new.>"},
	}, {
		name:   "a family stream: gets of the topics named, the groups allowed, never its info",
		policy: policy(t, "subscribe:fam.a"),
		cat: catalogueOf(natsgrant.Stream{Name: "FAM", Subjects: []string{"fam.>"}, Groups: []natsgrant.GroupConsumer{
			{Consumer: "g1_fam_a", Topic: "fam.a", Group: "g1"}, {Consumer: "g1_fam_b", Topic: "fam.b", Group: "g1"},
		}}),
		pubAllow: []string{"$JS.API.DIRECT.GET.FAM.fam.a", "$JS.API.DIRECT.GET.FAM.fam.a._k.*", "$JS.API.CONSUMER.MSG.NEXT.FAM.g1_fam_a"},
		notIn:    []string{"$JS.API.STREAM.INFO.FAM", "$JS.API.CONSUMER.MSG.NEXT.FAM.g1_fam_b", "$JS.API.DIRECT.GET.FAM.>"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := natsgrant.Compile(natsgrant.Input{Policy: tc.policy, Catalogue: tc.cat, OwnAccount: !tc.shared})
			if err != nil {
				t.Fatal(err)
			}
			holds := func(what string, list, want []string) {
				for _, w := range want {
					if !slices.Contains(list, w) {
						t.Errorf("%s %v lacks %s", what, list, w)
					}
				}
			}
			holds("publish allow", g.Publish.Allow, tc.pubAllow)
			holds("publish deny", g.Publish.Deny, tc.pubDeny)
			holds("subscribe allow", g.Subscribe.Allow, tc.subAllow)
			holds("subscribe deny", g.Subscribe.Deny, tc.subDeny)
			holds("JetStream", g.JetStream, tc.jetStream)
			for _, n := range tc.notIn {
				if slices.Contains(g.Publish.Allow, n) || slices.Contains(g.Subscribe.Allow, n) || slices.Contains(g.Streams, n) || slices.Contains(g.Services, n) {
					t.Errorf("%s is granted: %+v", n, g)
				}
			}
			if tc.services != nil && strings.Join(g.Services, " ") != strings.Join(tc.services, " ") {
				t.Errorf("service imports %v, want %v", g.Services, tc.services)
			}
			if tc.streams != nil && strings.Join(g.Streams, " ") != strings.Join(tc.streams, " ") {
				t.Errorf("stream imports %v, want %v", g.Streams, tc.streams)
			}
		})
	}
}

// TestCompileRefuses: policies NATS cannot hold exactly.
func TestCompileRefuses(t *testing.T) {
	for _, tc := range []struct {
		scopes []string
		shared bool
	}{
		{scopes: []string{"subscribe:a.**.c"}},
		{scopes: []string{"subscribe:orders.*.eu", "subscribe:orders.us.*"}},
		{scopes: []string{"publish:orders.*.eu", "publish:orders.us.*"}},
		{scopes: []string{"subscribe:$JS.API.**"}},
		{scopes: []string{"publish:_INBOX.x"}},
		{scopes: []string{"subscribe:orders._k"}},
		{scopes: []string{"publish:orders.*._k.*"}},
		{scopes: []string{"subscribe:*"}, shared: true},
	} {
		in := natsgrant.Input{Policy: policy(t, tc.scopes...), OwnAccount: !tc.shared}
		if _, err := natsgrant.Compile(in); !errors.Is(err, natsgrant.ErrNotExpressible) {
			t.Errorf("%v (shared %v): %v, want ErrNotExpressible", tc.scopes, tc.shared, err)
		}
	}
	// Rules one of which covers the other are fine.
	if _, err := natsgrant.Compile(natsgrant.Input{Policy: policy(t, "subscribe:orders.*", "subscribe:orders.**"), OwnAccount: true}); err != nil {
		t.Errorf("covering rules: %v", err)
	}
}
