package auth

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestHubInboxIsNotTheHubToken: the hub's inbox prefix is the reply
// subject of every hub publish, so every topic subscriber sees it; it must
// share nothing with the secret the hub's connection authenticates with.
func TestHubInboxIsNotTheHubToken(t *testing.T) {
	n := NewNATS(nil, nil, nil)
	inbox := strings.TrimPrefix(n.HubInboxPrefix(), "_EHUB_")
	if len(inbox) < 16 {
		t.Fatalf("hub inbox prefix %q", n.HubInboxPrefix())
	}
	if strings.Contains(n.HubToken(), inbox[:8]) {
		t.Fatalf("the hub inbox prefix %q repeats part of the hub token", n.HubInboxPrefix())
	}
}

// TestPlanImports: a principal's account imports each granted subject once:
// covered entries are dropped, overlapping ones and leading wildcards are
// refused, and the v2 ack form is left to the v1 one.
func TestPlanImports(t *testing.T) {
	cases := []struct {
		pub, sub      []string
		services, str []string
		ok            bool
	}{
		{pub: []string{"orders.new", "orders.new._k.*", "$JS.ACK.S.*.>", "$JS.ACK.*.*.S.*.>"}, sub: []string{"orders.* g1", "orders.>"},
			services: []string{"$JS.ACK.S.*.>", "orders.new", "orders.new._k.*"}, str: []string{"orders.>"}, ok: true},
		{pub: []string{"orders.*.eu", "orders.us.*"}},
		{sub: []string{">"}},
		{pub: []string{"*.x"}},
		{pub: []string{"a", "a"}, services: []string{"a"}, ok: true},
	}
	for _, c := range cases {
		p, ok := planImports(c.pub, c.sub)
		if ok != c.ok {
			t.Errorf("%v %v: ok %v", c.pub, c.sub, ok)
			continue
		}
		if ok && (strings.Join(p.services, ",") != strings.Join(c.services, ",") || strings.Join(p.streams, ",") != strings.Join(c.str, ",")) {
			t.Errorf("%v %v: plan %+v, want services %v streams %v", c.pub, c.sub, p, c.services, c.str)
		}
	}
	if accountName("p", []string{"a"}, nil) == accountName("p", nil, []string{"a"}) || accountName("p", []string{"a"}, nil) == accountName("q", []string{"a"}, nil) {
		t.Error("different principals or rights share an account name")
	}
}

// TestExpandLeading: a leading wildcard becomes the same entry on each
// first token of the hub's topics, queue groups kept.
func TestExpandLeading(t *testing.T) {
	got := expandLeading([]string{">", "*", "*.x g", "orders.>"}, []string{"a", "b"})
	want := "a,a.>,b,b.>,a,b,a.x g,b.x g,orders.>"
	if strings.Join(got, ",") != want {
		t.Fatalf("got %v, want %s", got, want)
	}
}

// TestPrincipalAccountGenerations: an account takes the imports a new
// connection of its principal lacks; one that would overlap an import it
// holds gives a new account, which the next connections then share.
func TestPrincipalAccountGenerations(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	defer srv.Shutdown()
	var a principalAccounts
	a.setServer(srv, slog.New(slog.DiscardHandler))
	defer a.close()
	// Each stays pinned (as while a connection joins it): none is freed.
	first, _, err := a.account(importPlan{account: "K", services: []string{"a.b"}, streams: []string{"a.b"}})
	if err != nil {
		t.Fatal(err)
	}
	grown, _, err := a.account(importPlan{account: "K", services: []string{"a.b", "c.d"}, streams: []string{"a.b"}})
	if err != nil || grown != first {
		t.Fatalf("a new import gave another account (%v)", err)
	}
	next, _, err := a.account(importPlan{account: "K", services: []string{"a.*"}})
	if err != nil || next == first {
		t.Fatalf("an overlapping import was added to the account (%v)", err)
	}
	again, _, err := a.account(importPlan{account: "K", services: []string{"a.*"}})
	if err != nil || again != next {
		t.Fatalf("the same rights made another account (%v)", err)
	}
}
