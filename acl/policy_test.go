package acl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/pattern"
)

func mustPolicy(tb testing.TB, p Policy) *CompiledPolicy {
	tb.Helper()
	cp, err := CompilePolicy(p)
	if err != nil {
		tb.Fatalf("CompilePolicy: %v", err)
	}
	return cp
}

func allow(action Action, topics ...string) Rule {
	return Rule{Effect: EffectAllow, Action: action, Topics: topics}
}

func deny(action Action, topics ...string) Rule {
	return Rule{Effect: EffectDeny, Action: action, Topics: topics}
}

type check struct {
	action       Action
	topic, group string
	want         bool
}

func runChecks(t *testing.T, cp *CompiledPolicy, checks []check) {
	t.Helper()
	for _, c := range checks {
		if got := cp.Allowed(c.action, c.topic, c.group); got != c.want {
			t.Errorf("Allowed(%q, %q, %q) = %v, want %v", c.action, c.topic, c.group, got, c.want)
		}
	}
}

func TestPolicyFirstMatchWins(t *testing.T) {
	allowFirst := mustPolicy(t, Policy{Rules: []Rule{
		allow(ActionPublish, "heartbeat.*"),
		deny(ActionPublish, "heartbeat.secret"),
	}})
	denyFirst := mustPolicy(t, Policy{Rules: []Rule{
		deny(ActionPublish, "heartbeat.secret"),
		allow(ActionPublish, "heartbeat.*"),
	}})
	runChecks(t, allowFirst, []check{
		{ActionPublish, "heartbeat.secret", "", true},
		{ActionPublish, "heartbeat.received", "", true},
	})
	runChecks(t, denyFirst, []check{
		{ActionPublish, "heartbeat.secret", "", false},
		{ActionPublish, "heartbeat.received", "", true},
	})
}

func TestPolicyDefaultDenyAndActions(t *testing.T) {
	cp := mustPolicy(t, Policy{Rules: []Rule{
		allow(ActionPublish, "heartbeat.received"),
		allow(ActionSubscribe, "process.**"),
		allow(ActionAny, "shared.*"),
		deny(ActionAny, "admin.**"),
		allow(ActionAny, "**"),
	}})
	runChecks(t, cp, []check{
		{ActionPublish, "heartbeat.received", "", true},
		{ActionSubscribe, "process.state", "", true},
		{ActionSubscribe, "process.a.b", "", true},
		{ActionPublish, "shared.x", "", true},
		{ActionSubscribe, "shared.x", "", true},
		{ActionPublish, "admin.users", "", false},
		{ActionSubscribe, "admin.a.b", "", false},
		{ActionPublish, "other", "", true},
		{ActionAny, "other", "", false},
		{Action("delete"), "other", "", false},
		{ActionPublish, "", "", false},
		{ActionPublish, "a..b", "", false},
		{ActionPublish, "a b", "", false},
		{ActionPublish, "a.>", "", false},
		{ActionSubscribe, "a.>", "", false},
	})
	empty := mustPolicy(t, Policy{})
	runChecks(t, empty, []check{
		{ActionPublish, "heartbeat.received", "", false},
		{ActionSubscribe, "heartbeat.received", "", false},
	})
	noAllow := mustPolicy(t, Policy{Rules: []Rule{allow(ActionPublish, "a")}})
	runChecks(t, noAllow, []check{
		{ActionSubscribe, "a", "", false},
		{ActionPublish, "b", "", false},
	})
	var nilPolicy *CompiledPolicy
	if nilPolicy.Allowed(ActionPublish, "a", "") {
		t.Error("nil policy must deny")
	}
}

func TestPolicyGroups(t *testing.T) {
	cp := mustPolicy(t, Policy{Rules: []Rule{
		{Effect: EffectAllow, Action: ActionSubscribe, Topics: []string{"jobs.*"}, Groups: []string{"workers"}},
		{Effect: EffectDeny, Action: ActionSubscribe, Topics: []string{"jobs.secret"}},
		{Effect: EffectAllow, Action: ActionAny, Topics: []string{"jobs.*"}, Groups: []string{"auditors", "*"}},
	}})
	runChecks(t, cp, []check{
		// rule 1 matches only the workers group
		{ActionSubscribe, "jobs.secret", "workers", true},
		// other groups fall through to the deny rule
		{ActionSubscribe, "jobs.secret", "others", false},
		{ActionSubscribe, "jobs.secret", "", false},
		// "*" in Groups admits any group, including none
		{ActionSubscribe, "jobs.run", "others", true},
		{ActionSubscribe, "jobs.run", "", true},
		// groups are ignored for publish
		{ActionPublish, "jobs.run", "nobody", true},
	})
	strict := mustPolicy(t, Policy{Rules: []Rule{
		{Effect: EffectAllow, Action: ActionSubscribe, Topics: []string{"jobs.*"}, Groups: []string{"workers"}},
	}})
	runChecks(t, strict, []check{
		{ActionSubscribe, "jobs.run", "workers", true},
		{ActionSubscribe, "jobs.run", "", false},
		{ActionSubscribe, "jobs.run", "Workers", false},
	})
}

func TestPolicyWildcardSubscriptions(t *testing.T) {
	cp := mustPolicy(t, Policy{Rules: []Rule{
		deny(ActionSubscribe, "process.secret.**"),
		allow(ActionSubscribe, "process.**"),
		allow(ActionSubscribe, "heartbeat.*"),
		allow(ActionPublish, "**"),
	}})
	runChecks(t, cp, []check{
		{ActionSubscribe, "heartbeat.*", "", true},
		{ActionSubscribe, "heartbeat.**", "", false}, // would include heartbeat.a.b
		{ActionSubscribe, "process.state.*", "", true},
		{ActionSubscribe, "process.**", "", false}, // includes process.secret.x
		{ActionSubscribe, "process.*", "", true},   // process.secret alone is not denied
		{ActionSubscribe, "process.public.**", "", true},
		{ActionSubscribe, "**", "", false},
		{ActionSubscribe, "*", "", false},
		{ActionPublish, "heartbeat.*", "", false}, // never publish to a wildcard
		{ActionSubscribe, "heartbeat.a*", "", false},
	})
	// "*" in a rule pattern must not grant a "**" subscription
	one := mustPolicy(t, Policy{Rules: []Rule{allow(ActionSubscribe, "a.*")}})
	runChecks(t, one, []check{
		{ActionSubscribe, "a.**", "", false},
		{ActionSubscribe, "a.*", "", true},
		{ActionSubscribe, "a.b", "", true},
	})
	runChecks(t, AllowAll(), []check{
		{ActionSubscribe, "**", "", true},
		{ActionSubscribe, "a.*.b", "g", true},
		{ActionPublish, "a.b", "", true},
		{ActionPublish, "a.*", "", false},
	})
}

// TestPolicyWildcardSubscriptionSound checks, over random policies, that a
// wildcard subscription is only allowed when every concrete topic it can
// match (enumerated up to 5 segments) is allowed.
func TestPolicyWildcardSubscriptionSound(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	topics := testutil.AllTopics([]string{"a", "b", "c", "d"}, 5)
	allowedSubs := 0
	for range 300 {
		var p Policy
		for range 1 + r.IntN(4) {
			rule := allow(ActionSubscribe, randPattern(r, 3))
			if r.IntN(3) == 0 {
				rule.Effect = EffectDeny
			}
			p.Rules = append(p.Rules, rule)
		}
		cp := mustPolicy(t, p)
		sub := randPattern(r, 3)
		if !cp.Allowed(ActionSubscribe, sub, "") {
			continue
		}
		allowedSubs++
		sp, err := pattern.Compile(sub)
		if err != nil {
			t.Fatal(err)
		}
		for _, topic := range topics {
			if sp.Match(topic) && !cp.Allowed(ActionSubscribe, topic, "") {
				t.Fatalf("policy %+v allows subscription %q but denies its topic %q", p, sub, topic)
			}
		}
	}
	if allowedSubs < 20 {
		t.Fatalf("weak generator: only %d subscriptions allowed", allowedSubs)
	}
}

func TestCompilePolicyErrors(t *testing.T) {
	tests := []struct {
		name    string
		rule    Rule
		wantErr []error
	}{
		{"ok", allow(ActionAny, "a.**"), nil},
		{"bad effect", Rule{Effect: "permit", Action: ActionPublish, Topics: []string{"a"}}, []error{ErrBadPolicy}},
		{"empty effect", Rule{Action: ActionPublish, Topics: []string{"a"}}, []error{ErrBadPolicy}},
		{"bad action", Rule{Effect: EffectAllow, Action: "write", Topics: []string{"a"}}, []error{ErrBadPolicy}},
		{"no topics", Rule{Effect: EffectAllow, Action: ActionPublish}, []error{ErrBadPolicy}},
		{"bad pattern", allow(ActionPublish, "a.b*"), []error{ErrBadPolicy, ErrBadPattern}},
		{"empty group", Rule{Effect: EffectAllow, Action: ActionSubscribe, Topics: []string{"a"}, Groups: []string{""}}, []error{ErrBadPolicy}},
		{"space group", Rule{Effect: EffectAllow, Action: ActionSubscribe, Topics: []string{"a"}, Groups: []string{"a b"}}, []error{ErrBadPolicy}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CompilePolicy(Policy{Rules: []Rule{allow(ActionPublish, "x"), tt.rule}})
			if tt.wantErr == nil && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tt.wantErr != nil && err == nil {
				t.Fatal("no error")
			}
			for _, want := range tt.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("error %v is not %v", err, want)
				}
			}
		})
	}
}

func TestPolicyJSONAndCopy(t *testing.T) {
	const src = `{"rules":[{"effect":"deny","action":"subscribe","topics":["a.secret"],"groups":["g"]},{"effect":"allow","action":"*","topics":["a.*"]}]}`
	var p Policy
	if err := json.Unmarshal([]byte(src), &p); err != nil {
		t.Fatal(err)
	}
	cp := mustPolicy(t, p)
	runChecks(t, cp, []check{
		{ActionSubscribe, "a.secret", "g", false},
		{ActionSubscribe, "a.secret", "h", true},
	})
	out, err := json.Marshal(cp.Policy())
	if err != nil || string(out) != src {
		t.Fatalf("round trip = %s, %v; want %s", out, err, src)
	}
	// later mutation of the source must not affect the compiled policy
	p.Rules[1].Topics[0] = "b.*"
	got := cp.Policy()
	got.Rules[0].Topics[0] = "zzz"
	if cp.Policy().Rules[1].Topics[0] != "a.*" || cp.Policy().Rules[0].Topics[0] != "a.secret" {
		t.Fatal("CompiledPolicy shares memory with its source or its Policy() copies")
	}
}

func TestPolicyJSONStrict(t *testing.T) {
	for _, src := range []string{
		`{"rules":[{"effect":"allow","action":"subscribe","topics":["a"],"group":["g"]}]}`,
		`{"rule":[]}`,
		`{"rules":"x"}`,
	} {
		var p Policy
		if err := json.Unmarshal([]byte(src), &p); !errors.Is(err, ErrBadPolicy) {
			t.Errorf("Unmarshal(%s) error = %v, want ErrBadPolicy", src, err)
		}
	}
}

func TestScopesToPolicy(t *testing.T) {
	tests := []struct {
		scopes  []string
		wantErr []error
		want    []Rule
	}{
		{nil, nil, []Rule{}},
		{[]string{"publish:heartbeat.*", "subscribe:process.**", "*:**"}, nil, []Rule{
			allow(ActionPublish, "heartbeat.*"),
			allow(ActionSubscribe, "process.**"),
			allow(ActionAny, "**"),
		}},
		{[]string{"publish:tenant:1.events"}, nil, []Rule{allow(ActionPublish, "tenant:1.events")}},
		{[]string{"publish"}, []error{ErrBadScope}, nil},
		{[]string{"write:a"}, []error{ErrBadScope}, nil},
		{[]string{":a"}, []error{ErrBadScope}, nil},
		{[]string{"publish:"}, []error{ErrBadScope, ErrBadPattern}, nil},
		{[]string{"publish:a*"}, []error{ErrBadScope, ErrBadPattern}, nil},
		{[]string{"publish:a", "subscribe:a..b"}, []error{ErrBadScope, ErrBadPattern}, nil},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			p, err := ScopesToPolicy(tt.scopes)
			if (err != nil) != (tt.wantErr != nil) {
				t.Fatalf("ScopesToPolicy(%q) error = %v, want %v", tt.scopes, err, tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("error %v is not %v", err, want)
				}
			}
			if err != nil {
				return
			}
			a, _ := json.Marshal(p.Rules)
			b, _ := json.Marshal(tt.want)
			if string(a) != string(b) {
				t.Fatalf("rules = %s, want %s", a, b)
			}
		})
	}
}

func TestContext(t *testing.T) {
	ctx := context.Background()
	if _, ok := PolicyFrom(ctx); ok {
		t.Fatal("empty context has a policy")
	}
	if _, ok := PolicyFrom(WithPolicy(ctx, nil)); ok {
		t.Fatal("nil policy reported as present")
	}
	cp := AllowAll()
	got, ok := PolicyFrom(WithPolicy(ctx, cp))
	if !ok || got != cp {
		t.Fatal("policy not round-tripped")
	}
	// a plain string key of the same name must not collide
	type otherKey struct{}
	if _, ok := PolicyFrom(context.WithValue(ctx, otherKey{}, cp)); ok {
		t.Fatal("foreign key read as policy")
	}
}

func BenchmarkPolicyAllowed100Rules(b *testing.B) {
	var p Policy
	for i := range 99 {
		p.Rules = append(p.Rules, allow(ActionAny, fmt.Sprintf("svc%d.**.state", i), fmt.Sprintf("svc%d.*", i)))
	}
	p.Rules = append(p.Rules, allow(ActionPublish, "heartbeat.**.received"))
	// the matching rule is the 100th
	cp := mustPolicy(b, p)
	b.ReportAllocs()
	for b.Loop() {
		if !cp.Allowed(ActionPublish, "heartbeat.node7.worker3.received", "") {
			b.Fatal("denied")
		}
	}
}

// TestAllowedAll: every topic of a pattern, for either action.
func TestAllowedAll(t *testing.T) {
	p := mustPolicy(t, Policy{Rules: []Rule{
		deny(ActionPublish, "a.secret"),
		allow(ActionPublish, "a.**"),
		allow(ActionSubscribe, "b.*"),
	}})
	for _, tc := range []struct {
		action  Action
		pattern string
		want    bool
	}{
		{ActionPublish, "b.x", false},
		{ActionPublish, "a.x", true},
		{ActionPublish, "a.*.*", true},
		{ActionPublish, "a.*", false}, // a.secret is denied
		{ActionSubscribe, "b.*", true},
		{ActionSubscribe, "b.**", false},
		{ActionSubscribe, "b.>", false},
		{ActionAny, "b.*", false},
	} {
		if got := p.AllowedAll(tc.action, tc.pattern, ""); got != tc.want {
			t.Errorf("AllowedAll(%s, %q) = %v, want %v", tc.action, tc.pattern, got, tc.want)
		}
	}
}

// randPattern draws from a tiny alphabet so that matches are frequent.
func randPattern(r *rand.Rand, maxSegs int) string {
	segs := []string{"a", "b", "c", "*", "**"}
	n := 1 + r.IntN(maxSegs)
	out := make([]string, n)
	for i := range out {
		out[i] = segs[r.IntN(len(segs))]
	}
	return strings.Join(out, ".")
}
