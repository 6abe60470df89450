package hub_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/eventhub/eventhub/acl"
	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/hub"
)

// TestNativeSubscriptionsStayWithinPolicy checks, for every shape of
// subscribe rule, that a native client reads exactly what the policy grants
// whatever subject it subscribes to: NATS lets a ">" through where the
// allow list has a "*", so "orders.*" alone would let "orders.>" read
// deeper topics, dead letters and keyed subjects.
func TestNativeSubscriptionsStayWithinPolicy(t *testing.T) {
	h := startHub(t, hub.Config{Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}})
	url := h.Bus.Server().ClientURL()
	pubc, err := nats.Connect(url, nats.Token(mint(t, time.Minute, "admin")))
	if err != nil {
		t.Fatal(err)
	}
	defer pubc.Close()

	published := []string{
		"orders.a", "orders.a.b", "orders.a.b.c", "orders.x.dlq", "orders.dlq",
		"orders.a._k.k1", "orders.a._k.k1.x", "orders.new", "orders.new.dlq",
		"orders.new._k.k2", "orders.new._k.k2.x", "orders.new.child",
		"a.b.c", "a.b.c._k.k3", "a.b.c.d", "a.b.c._k.k3.x", "a.b.d", "a.b.c.dlq",
		"other.x", "other",
	}
	cases := []struct {
		name   string
		policy acl.Policy
		queue  string   // queue group every attempt uses ("" none)
		grants []string // of published, what the policy grants
		reads  []string // subscriptions that must receive their granted subjects
		tries  []string // wider subscriptions a client may try
	}{{
		name:   "star at the end",
		policy: scopes("subscribe:orders.*"),
		// keyed subjects of "orders.*" topics are not granted natively
		grants: []string{"orders.a", "orders.dlq", "orders.new"},
		reads:  []string{"orders.*", "orders.a"},
		tries:  []string{"orders.>", ">", "orders.*.>", "orders.*.*", "orders.a.>", "orders.*._k.*", "*.>"},
	}, {
		name:   "star in the middle",
		policy: scopes("subscribe:a.*.c"),
		grants: []string{"a.b.c", "a.b.c._k.k3"},
		reads:  []string{"a.*.c", "a.b.c._k.*"},
		tries:  []string{"a.>", "a.*.>", "a.*.c.>", "a.b.c._k.>", "a.b.>", ">"},
	}, {
		name:   "double star",
		policy: scopes("subscribe:orders.**"),
		grants: []string{
			"orders.a", "orders.a.b", "orders.a.b.c", "orders.x.dlq", "orders.dlq",
			"orders.a._k.k1", "orders.a._k.k1.x", "orders.new", "orders.new.dlq",
			"orders.new._k.k2", "orders.new._k.k2.x", "orders.new.child",
		},
		reads: []string{"orders.>"},
		tries: []string{">", "*.>", "orders.*"},
	}, {
		name:   "one topic with keys",
		policy: scopes("subscribe:orders.new"),
		grants: []string{"orders.new", "orders.new._k.k2"},
		reads:  []string{"orders.new", "orders.new._k.*"},
		tries:  []string{"orders.new.>", "orders.new._k.>", "orders.>", "orders.*", ">"},
	}, {
		name:   "star and double star together",
		policy: scopes("subscribe:orders.*", "subscribe:orders.**"),
		grants: []string{
			"orders.a", "orders.a.b", "orders.a.b.c", "orders.x.dlq", "orders.dlq",
			"orders.a._k.k1", "orders.a._k.k1.x", "orders.new", "orders.new.dlq",
			"orders.new._k.k2", "orders.new._k.k2.x", "orders.new.child",
		},
		reads: []string{"orders.>", "orders.*"},
		tries: []string{">"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := auth.MintHS256(secret, auth.MintClaims{Subject: "reader", Policy: &tc.policy, TTL: time.Minute}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			nc, err := nats.Connect(url, nats.Token(tok), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer nc.Close()
			got := map[string][]string{} // subscription → subjects received
			msgs := make(chan *nats.Msg, 1024)
			subscribe := func(subj, queue string) {
				var err error
				if queue != "" {
					_, err = nc.ChanQueueSubscribe(subj, queue, msgs)
				} else {
					_, err = nc.ChanSubscribe(subj, msgs)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range append(slices.Clone(tc.reads), tc.tries...) {
				subscribe(s, tc.queue)
			}
			// A queue group outside the rule reads nothing either.
			if tc.queue != "" {
				subscribe("orders.*", "other-group")
				subscribe("orders.*", "")
			}
			const fence = "fence.done"
			fenceTok := mint(t, time.Minute, "subscribe:fence.*")
			fc, err := nats.Connect(url, nats.Token(fenceTok))
			if err != nil {
				t.Fatal(err)
			}
			defer fc.Close()
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			for _, s := range published {
				if err := pubc.Publish(s, []byte(`{}`)); err != nil {
					t.Fatal(err)
				}
			}
			if err := pubc.Flush(); err != nil {
				t.Fatal(err)
			}
			// The last granted subject, published again, marks the end: one
			// connection's messages arrive in order.
			last := tc.grants[len(tc.grants)-1]
			if err := pubc.Publish(last, []byte(`"end"`)); err != nil {
				t.Fatal(err)
			}
			deadline := time.After(10 * time.Second)
			for done := false; !done; {
				select {
				case m := <-msgs:
					if string(m.Data) == `"end"` {
						done = true
						continue
					}
					got[m.Sub.Subject+"|"+m.Sub.Queue] = append(got[m.Sub.Subject+"|"+m.Sub.Queue], m.Subject)
					if !slices.Contains(tc.grants, m.Subject) {
						t.Errorf("subscription %q (queue %q) read %s, which the policy does not grant", m.Sub.Subject, m.Sub.Queue, m.Subject)
					}
				case <-deadline:
					t.Fatal("the end marker never arrived")
				}
			}
			// Drain what is still queued behind the marker.
			for n := len(msgs); n > 0; n-- {
				m := <-msgs
				if string(m.Data) != `"end"` && !slices.Contains(tc.grants, m.Subject) {
					t.Errorf("subscription %q read %s, which the policy does not grant", m.Sub.Subject, m.Subject)
				}
			}
			// Every granted subject reached the subscriptions meant to read it.
			var read []string
			for _, s := range tc.reads {
				read = append(read, got[s+"|"+tc.queue]...)
			}
			if tc.queue != "" {
				// one member of a queue group gets each message, whichever
				// of the connection's subscriptions in that group it is
				for sub, subjects := range got {
					if strings.HasSuffix(sub, "|"+tc.queue) {
						read = append(read, subjects...)
					}
				}
			}
			for _, g := range tc.grants {
				if g != last && !slices.Contains(read, g) {
					t.Errorf("granted %s never arrived (reads %v got %v)", g, tc.reads, got)
				}
			}
			// A group-restricted rule grants nothing outside its group.
			if tc.queue != "" {
				for sub, subjects := range got {
					if !strings.HasSuffix(sub, "|"+tc.queue) && len(subjects) > 0 {
						t.Errorf("subscription %s, outside group %s, read %v", sub, tc.queue, subjects)
					}
				}
			}
		})
	}
}

// TestNativePolicyNotExpressibleIsRefused: rules NATS cannot enforce exactly
// refuse the native connection rather than grant more: a "**" in the
// middle, and rules that overlap without one covering the other (the
// client's account would import the events they share twice).
func TestNativePolicyNotExpressibleIsRefused(t *testing.T) {
	h := startHub(t, hub.Config{Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}})
	for _, s := range [][]string{
		{"subscribe:a.**.c"},
		{"subscribe:orders.*.eu", "subscribe:orders.us.*"},
		{"publish:orders.*.eu", "publish:orders.us.*"},
	} {
		if nc, err := nats.Connect(h.Bus.Server().ClientURL(), nats.Token(mint(t, time.Minute, s...))); err == nil {
			nc.Close()
			t.Errorf("%s: a policy NATS cannot express exactly was accepted", s)
		}
	}
	// Rules one of which covers the other are fine.
	nc, err := nats.Connect(h.Bus.Server().ClientURL(), nats.Token(mint(t, time.Minute, "subscribe:orders.*", "subscribe:orders.**")))
	if err != nil {
		t.Fatalf("covering rules were refused: %v", err)
	}
	nc.Close()
}

func scopes(s ...string) acl.Policy {
	p, err := acl.ScopesToPolicy(s)
	if err != nil {
		panic(err)
	}
	return p
}
