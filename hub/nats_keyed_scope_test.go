package hub_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/eventhub/eventhub/acl"
	"github.com/eventhub/eventhub/facade"
)

// TestNativeDeepWildcardKeepsOffShallowerKeyedEvents: a rule with more
// segments than a topic has ("secret.*.*.*", "solo.*.*", "*.*.*.*") must not
// reach the keyed events of that shorter topic ("secret.data._k.<key>" has
// as many tokens as the rule), neither live nor by publishing into its
// stream. Over WebSocket and HTTP the same token is refused on those topics.
func TestNativeDeepWildcardKeepsOffShallowerKeyedEvents(t *testing.T) {
	h := jsHub(t)
	for _, tc := range []struct {
		rule    string // subscribe and publish
		topic   string // a shorter topic the rule does not match
		granted string // a topic the rule matches
		filter  string // the rule's subject on the topic's first token
	}{
		{"secret.*.*.*", "secret.data", "secret.a.b.c", "secret.*.*.*"},
		{"solo.*.*", "solo", "solo.a.b", "solo.*.*"},
		{"*.*.*.*", "secret.data", "secret.a.b.c", "secret.*.*.*"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			// The topic exists, with a keyed event, before the client connects.
			if _, err := h.Bus.Publish(t.Context(), tc.topic, []byte(`{"n":0}`), facade.PublishOptions{Key: "k0"}); err != nil {
				t.Fatal(err)
			}
			if _, err := h.Bus.Publish(t.Context(), tc.granted, []byte(`{"n":0}`), facade.PublishOptions{}); err != nil {
				t.Fatal(err)
			}
			c := connectNative(t, h, mint(t, time.Minute, "subscribe:"+tc.rule, "publish:"+tc.rule))
			msgs := make(chan *nats.Msg, 64)
			for _, s := range []string{tc.topic + "._k.*", tc.topic + "._k.>", tc.filter, strings.TrimSuffix(tc.filter, "*") + ">"} {
				// Refused subscriptions report a violation asynchronously.
				if _, err := c.nc.ChanSubscribe(s, msgs); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.nc.Flush(); err != nil {
				t.Fatal(err)
			}
			if _, err := h.Bus.Publish(t.Context(), tc.topic, []byte(`{"n":1}`), facade.PublishOptions{Key: "k1"}); err != nil {
				t.Fatal(err)
			}
			if _, err := h.Bus.Publish(t.Context(), tc.granted, []byte(`"end"`), facade.PublishOptions{}); err != nil {
				t.Fatal(err)
			}
			deadline := time.After(10 * time.Second)
			for done := false; !done; {
				select {
				case m := <-msgs:
					if strings.HasPrefix(m.Subject, tc.topic+"._k.") {
						t.Errorf("subscription %q read keyed event %s of topic %s", m.Sub.Subject, m.Subject, tc.topic)
					}
					done = string(m.Data) == `"end"`
				case <-deadline:
					t.Fatal("the granted topic's event never arrived")
				}
			}

			// Publishing a keyed event of the shorter topic is refused.
			subj := tc.topic + "._k.injected"
			c.refused(t, subj, func(ctx context.Context) error {
				_, err := c.js.Publish(ctx, subj, []byte(`{"bad":1}`))
				return err
			})
			got, err := h.Bus.LatestByKey(t.Context(), tc.topic, []string{"injected"})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 0 {
				t.Errorf("a native client stored %v into topic %s", got, tc.topic)
			}
		})
	}
}

// TestNativeGroupRuleGivesNoLiveReads: a subscribe rule restricted to
// groups grants the groups' durable consumers; over WebSocket it gives no
// live subscription, and natively no core subscription either, queue group
// named after the group or not.
func TestNativeGroupRuleGivesNoLiveReads(t *testing.T) {
	h := jsHub(t)
	policy := acl.Policy{Rules: []acl.Rule{
		{Effect: acl.EffectAllow, Action: acl.ActionSubscribe, Topics: []string{"billing.*"}, Groups: []string{"billing"}},
	}}
	c := connectNative(t, h, mintPolicy(t, time.Minute, policy))
	msgs := make(chan *nats.Msg, 16)
	for _, q := range []string{"billing", ""} {
		for len(c.errs) > 0 {
			<-c.errs
		}
		if _, err := c.nc.ChanQueueSubscribe("billing.*", q, msgs); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(5 * time.Second)
		for refused := false; !refused; {
			select {
			case err := <-c.errs:
				refused = strings.Contains(err.Error(), "Permissions Violation for Subscription to \"billing.*\"")
			case m := <-msgs:
				t.Fatalf("read %s live under a rule restricted to groups", m.Subject)
			case <-deadline:
				t.Fatalf("queue %q: a live subscription under a rule restricted to groups was accepted", q)
			}
		}
	}
}
