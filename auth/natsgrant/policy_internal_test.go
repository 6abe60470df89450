package natsgrant

import (
	"errors"
	"slices"
	"testing"

	"github.com/eventhub/eventhub/acl"
)

func TestTopicEntries(t *testing.T) {
	allow := func(action acl.Action, topics ...string) acl.Rule {
		return acl.Rule{Effect: acl.EffectAllow, Action: action, Topics: topics}
	}
	deny := func(action acl.Action, topics ...string) acl.Rule {
		return acl.Rule{Effect: acl.EffectDeny, Action: action, Topics: topics}
	}
	tests := []struct {
		name     string
		rules    []acl.Rule
		pub, sub []string
		ok       bool
	}{
		{"empty denies all", nil, []string{}, []string{}, true},
		{"allow all", []acl.Rule{allow(acl.ActionAny, "**")}, []string{">"}, []string{">"}, true},
		{"mixed", []acl.Rule{
			allow(acl.ActionPublish, "heartbeat.*", "heartbeat.received"),
			allow(acl.ActionSubscribe, "process.**"),
			{Effect: acl.EffectAllow, Action: acl.ActionSubscribe, Topics: []string{"jobs.*"}, Groups: []string{"w1", "w2"}},
			{Effect: acl.EffectAllow, Action: acl.ActionSubscribe, Topics: []string{"any.*"}, Groups: []string{"w1", "*"}},
			allow(acl.ActionAny, "shared.x"),
		}, []string{"heartbeat.*", "heartbeat.received", "shared.x"},
			[]string{"process.>", "jobs.* w1", "jobs.* w2", "any.*", "shared.x"}, true},
		{"harmless deny", []acl.Rule{deny(acl.ActionPublish, "secret.**"), allow(acl.ActionPublish, "public.*")}, []string{"public.*"}, []string{}, true},
		{"shadowed deny", []acl.Rule{allow(acl.ActionPublish, "a.*"), deny(acl.ActionPublish, "a.b")}, []string{"a.*"}, []string{}, true},
		{"deny of other action", []acl.Rule{deny(acl.ActionSubscribe, "a.*"), allow(acl.ActionPublish, "a.*")}, []string{"a.*"}, []string{}, true},
		{"overriding deny", []acl.Rule{deny(acl.ActionPublish, "a.secret"), allow(acl.ActionPublish, "a.*")}, nil, nil, false},
		{"overriding deny via *", []acl.Rule{deny(acl.ActionAny, "a.secret"), allow(acl.ActionSubscribe, "**")}, nil, nil, false},
		{"inner **", []acl.Rule{allow(acl.ActionSubscribe, "a.**.b")}, nil, nil, false},
		{"leading **", []acl.Rule{allow(acl.ActionPublish, "**.b")}, nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := acl.CompilePolicy(acl.Policy{Rules: tt.rules})
			if err != nil {
				t.Fatal(err)
			}
			pub, sub, err := topicEntries(p)
			if ok := err == nil; ok != tt.ok || !slices.Equal(pub, tt.pub) || !slices.Equal(sub, tt.sub) {
				t.Fatalf("topicEntries() = %q, %q, %v; want %q, %q, ok %v", pub, sub, err, tt.pub, tt.sub, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrNotExpressible) {
				t.Fatalf("error %v does not wrap ErrNotExpressible", err)
			}
			if err == nil && (pub == nil || sub == nil) {
				t.Fatal("lists must be non-nil (nil means allow-all to NATS)")
			}
		})
	}
	if pub, sub, err := topicEntries(nil); err != nil || pub == nil || sub == nil || len(pub)+len(sub) != 0 {
		t.Fatal("a nil policy must translate to deny-all")
	}
}
