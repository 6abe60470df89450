package natsgrant_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/eventhub/eventhub/acl"
)

// testAuth places each client of the test server: user "hub" in the
// global account with every right, user "case" with the current case's
// permissions and account.
type testAuth struct {
	mu   sync.Mutex
	user *server.User
}

func (a *testAuth) Check(c server.ClientAuthentication) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch c.GetOpts().Username {
	case "hub":
		c.RegisterUser(&server.User{Username: "hub"})
	case "case":
		c.RegisterUser(a.user)
	default:
		return false
	}
	return true
}

// Fence subjects: the last message of each phase, granted to every case.
const (
	fenceSub = "zzfence.sub"
	fencePub = "zzfence.pub"
)

// TestOracleMatchesRealServer checks the differential test's picture of
// NATS against a real nats-server and a real nats.go client, on a sample
// of generated cases and on the fuzz corpus: every subscription the model
// accepts receives exactly the events the model says, and the hub's
// account receives exactly the publishes the model says.
func TestOracleMatchesRealServer(t *testing.T) {
	ta := &testAuth{}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, CustomClientAuthentication: ta})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("the test server did not start")
	}
	hubc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("hub", ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hubc.Close)

	var specs []spec
	corpus, _ := filepath.Glob("testdata/fuzz/FuzzGrantMatchesACL/*")
	for _, f := range corpus {
		if sp, ok := readCorpus(t, f); ok {
			specs = append(specs, sp)
		}
	}
	r := rand.New(rand.NewPCG(22, 22))
	for len(specs) < len(corpus)+40 {
		specs = append(specs, randomSpec(r))
	}
	checked := 0
	for i, sp := range specs {
		sc, ok := sp.scenario()
		if !ok {
			continue
		}
		c, ok, err := sc.compile()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		checked++
		acc := srv.GlobalAccount()
		if c.own {
			acc = ownAccount(t, srv, fmt.Sprintf("CASE%d", i), c)
		}
		ta.mu.Lock()
		ta.user = &server.User{Username: "case", Account: acc, Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: append(slices.Clone(c.grant.Publish.Allow), fencePub), Deny: c.grant.Publish.Deny},
			Subscribe: &server.SubjectPermission{Allow: append(slices.Clone(c.grant.Subscribe.Allow), fenceSub), Deny: c.grant.Subscribe.Deny},
		}}
		ta.mu.Unlock()
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkOnServer(t, srv, hubc, c) })
		if t.Failed() {
			t.Fatalf("case %s", sc)
		}
	}
	t.Logf("%d cases checked on the server", checked)
	if checked < 30 {
		t.Fatalf("only %d cases checked", checked)
	}
}

// ownAccount makes the account of a case: the grant's imports from the
// global account, and the fences.
func ownAccount(t *testing.T, srv *server.Server, name string, c *compiled) *server.Account {
	t.Helper()
	acc, err := srv.RegisterAccount(name)
	if err != nil {
		t.Fatal(err)
	}
	hub := srv.GlobalAccount()
	for _, s := range append(slices.Clone(c.grant.Services), fencePub) {
		if err := hub.AddServiceExport(s, nil); err != nil {
			t.Fatal(err)
		}
		if err := acc.AddServiceImport(hub, s, s); err != nil {
			t.Fatalf("import %s: %v", s, err)
		}
	}
	for _, s := range append(slices.Clone(c.grant.Streams), fenceSub) {
		if err := hub.AddStreamExport(s, nil); err != nil {
			t.Fatal(err)
		}
		if err := acc.AddStreamImport(hub, s, ""); err != nil {
			t.Fatalf("import %s: %v", s, err)
		}
	}
	return acc
}

func checkOnServer(t *testing.T, srv *server.Server, hubc *nats.Conn, c *compiled) {
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("case", ""), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	// Subscriptions: every filter, one of them in a queue group.
	filters := slices.Clone(c.filters)
	queues := make([]string, len(filters))
	queues[len(queues)/2] = "g1"
	type delivery struct{ filter, subject string }
	got := map[delivery]bool{}
	msgs := make(chan *nats.Msg, 1<<16)
	for i, f := range filters {
		if _, err := nc.ChanQueueSubscribe(f, queues[i], msgs); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nc.ChanSubscribe(fenceSub, msgs); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.subjects {
		if err := hubc.Publish(s, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := hubc.Publish(fenceSub, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case m := <-msgs:
			if done = m.Subject == fenceSub; !done {
				got[delivery{m.Sub.Subject, m.Subject}] = true
			}
		case <-deadline:
			t.Fatal("the fence never arrived")
		}
	}
	accepted, filtering := c.natsSubscribe(filters, queues)
	for i, f := range filters {
		for _, s := range c.subjects {
			want := accepted[i] && c.natsDelivers(s, f, filtering)
			if got[delivery{f, s}] != want {
				t.Errorf("subscription %q (queue %q) got %s: %v, the model says %v (grant %+v)", f, queues[i], s, got[delivery{f, s}], want, c.grant)
			}
		}
	}

	// Publishes, topics and JetStream API subjects alike: the hub's
	// account receives what the model says.
	in, err := hubc.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Unsubscribe() }()
	if err := hubc.Flush(); err != nil {
		t.Fatal(err)
	}
	subjects := slices.Clone(c.subjects)
	for _, call := range c.jsCalls() {
		subjects = append(subjects, call.subject)
	}
	for _, s := range subjects {
		if err := nc.Publish(s, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Publish(fencePub, nil); err != nil {
		t.Fatal(err)
	}
	arrived := map[string]bool{}
	for {
		m, err := in.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("the fence never arrived: %v", err)
		}
		if m.Subject == fencePub {
			break
		}
		arrived[m.Subject] = true
	}
	for _, s := range subjects {
		if want := c.natsPublish(s); arrived[s] != want {
			t.Errorf("publish %s arrived: %v, the model says %v (grant %+v)", s, arrived[s], want, c.grant)
		}
	}
	if c.own {
		checkReplies(t, hubc, nc, c)
	}
}

// checkReplies: in an account of its own, the answer to a JetStream API
// request the client makes comes back into that account whatever reply
// subject it names: it reaches the hub's account (and a topic's stream)
// only on a subject the client may publish to itself (NATS passes an
// answer on through an import of that very subject).
func checkReplies(t *testing.T, hubc, nc *nats.Conn, c *compiled) {
	var mu sync.Mutex
	answered := 0
	api, err := hubc.Subscribe("$JS.API.>", func(m *nats.Msg) {
		_ = m.Respond([]byte(`{}`))
		mu.Lock()
		answered++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = api.Unsubscribe() }()
	in, err := hubc.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Unsubscribe() }()
	if err := hubc.Flush(); err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, call := range c.jsCalls() {
		if strings.HasPrefix(call.subject, "$JS.API.") && c.natsPublish(call.subject) && len(calls) < 3 {
			calls = append(calls, call.subject)
		}
	}
	if len(calls) == 0 {
		return
	}
	sent := 0
	for _, call := range calls {
		for _, reply := range c.subjects {
			if err := nc.PublishRequest(call, reply, nil); err != nil {
				t.Fatal(err)
			}
			sent++
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := answered
		mu.Unlock()
		if n == sent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d requests answered", n, sent)
		}
		if err := hubc.Flush(); err != nil { // a round trip, then look again
			t.Fatal(err)
		}
	}
	// The answers were sent before this fence: whatever they reached in
	// the hub's account arrived before it.
	if err := hubc.Publish(fenceSub, nil); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := in.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("the fence never arrived: %v", err)
		}
		if m.Subject == fenceSub {
			return
		}
		if slices.Contains(c.subjects, m.Subject) && !c.aclAllows(acl.ActionPublish, m.Subject) {
			t.Errorf("the answer to a request with reply subject %s reached the hub's account, where the policy refuses the client to publish", m.Subject)
		}
	}
}

// readCorpus reads a fuzz corpus file of FuzzGrantMatchesACL.
func readCorpus(t *testing.T, path string) (spec, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 5 {
		return spec{}, false
	}
	var sp spec
	if _, err := fmt.Sscanf(strings.TrimSuffix(strings.TrimPrefix(lines[1], "string("), ")"), "%q", &sp.rules); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if _, err := fmt.Sscanf(strings.TrimSuffix(strings.TrimPrefix(lines[2], "string("), ")"), "%q", &sp.topics); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	sp.own = lines[3] == "bool(true)"
	sp.unlisted = lines[4] == "bool(true)"
	return sp, true
}
