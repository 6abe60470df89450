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

// TestAccountNames: principals, and rights, do not share accounts.
func TestAccountNames(t *testing.T) {
	if accountName("p", []string{"a"}, nil) == accountName("p", nil, []string{"a"}) || accountName("p", []string{"a"}, nil) == accountName("q", []string{"a"}, nil) {
		t.Error("different principals or rights share an account name")
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
