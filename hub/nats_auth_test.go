package hub_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

func startHub(t *testing.T, cfg hub.Config) *hub.Hub {
	t.Helper()
	if cfg.NATS.DataDir == "" {
		cfg.NATS.DataDir = t.TempDir()
	}
	h, err := hub.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Shutdown(t.Context()) })
	return h
}

func mint(t *testing.T, ttl time.Duration, scopes ...string) string {
	t.Helper()
	tok, err := auth.MintHS256(secret, auth.MintClaims{Subject: "svc", Scopes: scopes, TTL: ttl}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestNativeNATSClientsNeedTokens(t *testing.T) {
	h := startHub(t, hub.Config{Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}})
	url := h.Bus.Server().ClientURL()
	// The hub's own in-process connection works with full rights.
	for _, topic := range []string{"process.state", "heartbeat.received"} {
		if _, err := h.Bus.Publish(t.Context(), topic, []byte(`{"ok":1}`), facadeOpts()); err != nil {
			t.Fatalf("hub's own publish: %v", err)
		}
	}

	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("a native client without credentials was accepted")
	}
	if nc, err := nats.Connect(url, nats.Token("not-a-jwt")); err == nil {
		nc.Close()
		t.Fatal("a native client with a bad token was accepted")
	}
	if nc, err := nats.Connect(url, nats.Token(mint(t, time.Minute, "publish:a.**.c"))); err == nil {
		nc.Close()
		t.Fatal("a policy NATS cannot express was accepted")
	}

	errs := make(chan error, 10)
	tok := mint(t, time.Minute, "publish:heartbeat.*", "subscribe:heartbeat.*")
	nc, err := nats.Connect(url, nats.UserInfo("any", tok), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		errs <- err
	}))
	if err != nil {
		t.Fatalf("a valid token was refused: %v", err)
	}
	defer nc.Close()
	js, _ := njs.New(nc)
	// Allowed: a JetStream-acknowledged publish, plain and keyed.
	if _, err := js.Publish(t.Context(), "heartbeat.received", []byte(`{"pid":1}`)); err != nil {
		t.Fatalf("allowed publish: %v", err)
	}
	if _, err := js.Publish(t.Context(), "heartbeat.received._k.h:n:1", []byte(`{"pid":1}`)); err != nil {
		t.Fatalf("allowed keyed publish: %v", err)
	}
	// Refused: another topic, and the JetStream API.
	nc.Publish("process.state", []byte(`{"forged":true}`))
	nc.Flush()
	waitErr(t, errs, "Publish to")
	if _, err := nc.SubscribeSync("process.state"); err == nil {
		nc.Flush()
		waitErr(t, errs, "Subscription to")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err == nil {
		t.Fatal("the JetStream API was open to a native client")
	}
	// Nothing forged reached the stream.
	name, err := h.Bus.JetStream().StreamNameBySubject(t.Context(), "process.state")
	if err != nil {
		t.Fatal(err)
	}
	if n := storedIn(t, h, name); n != 1 {
		t.Fatalf("process.state holds %d messages, want only the hub's 1", n)
	}
}

// TestNativeWildcardPolicyCannotReachSystemSubjects: a token allowed
// everything ("**" is NATS ">") reaches the topics, JetStream reads and
// publishes among them, but neither the rest of the JetStream API nor the
// hub's own traffic.
func TestNativeWildcardPolicyCannotReachSystemSubjects(t *testing.T) {
	h := startHub(t, hub.Config{Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}})
	// The topic exists when the client connects (see expandLeading).
	if _, err := h.Bus.Publish(t.Context(), "sys.t", []byte(`0`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 100)
	nc, err := nats.Connect(h.Bus.Server().ClientURL(), nats.Token(mint(t, time.Minute, "publish:**", "subscribe:**")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	all, err := nc.SubscribeSync("sys.>")
	if err != nil {
		t.Fatal(err)
	}
	inboxes, err := nc.SubscribeSync("_INBOX.>")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	// The hub works: it publishes, creates a group, pulls and acks.
	got := make(chan struct{}, 1)
	unsub, err := h.Bus.Subscribe(t.Context(), "sys.t", "g", func(context.Context, facade.Delivery) error {
		got <- struct{}{}
		return nil
	}, facade.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub.Stop(context.Background())
	if _, err := h.Bus.Publish(t.Context(), "sys.t", []byte(`1`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	<-got
	// The topic subscriber saw the topic's message and nothing of the hub's.
	if m, err := all.NextMsg(5 * time.Second); err != nil || m.Subject != "sys.t" {
		t.Fatalf("the topic's event: %v", err)
	}
	if m, err := inboxes.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("a native client read %s", m.Subject)
	}
	js, _ := njs.New(nc)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, "sys.t", []byte(`2`)); err != nil {
		t.Fatalf("js.Publish on a topic: %v", err)
	}
	short, cancelShort := context.WithTimeout(t.Context(), time.Second)
	defer cancelShort()
	if _, err := js.AccountInfo(short); err == nil {
		t.Fatal("a wildcard policy reached the account's JetStream info")
	}
	waitErr(t, errs, "Publish to \"$JS.API.INFO")
	stream := streamOf(t, h, "sys.t")
	nc.Publish("$JS.API.STREAM.DELETE."+stream, nil)
	nc.Flush()
	waitErr(t, errs, "Publish to \"$JS.API.STREAM.DELETE")
	if _, err := h.Bus.JetStream().Stream(t.Context(), stream); err != nil {
		t.Fatalf("the topic's stream: %v", err)
	}
}

func TestNativeNATSConnectionEndsWithToken(t *testing.T) {
	h := startHub(t, hub.Config{Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret, Leeway: time.Millisecond}}})
	closed := make(chan struct{})
	nc, err := nats.Connect(h.Bus.Server().ClientURL(), nats.Token(mint(t, 2*time.Second, "subscribe:x")),
		nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	select {
	case <-closed:
	case <-time.After(15 * time.Second):
		t.Fatal("the connection outlived its token")
	}
}

func TestInsecureListenRefused(t *testing.T) {
	_, err := hub.Start(t.Context(), hub.Config{NATS: hub.NATSConfig{DataDir: t.TempDir(), Host: "0.0.0.0"}})
	if !errors.Is(err, hub.ErrInsecureListen) {
		t.Fatalf("err %v, want ErrInsecureListen", err)
	}
}

func waitErr(t *testing.T, errs chan error, want string) {
	t.Helper()
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "Permissions Violation") || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want a permissions violation for %s", err, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no permissions violation for %s", want)
	}
}

// TestNativeScopedClientsOnEmbeddedServer: a token scoped to topics
// connects to the embedded server in an account of its own, unless
// nativeScopedClients puts it in the hub's; an admin token is always in
// the hub's account.
func TestNativeScopedClientsOnEmbeddedServer(t *testing.T) {
	for _, shared := range []bool{false, true} {
		h := startHub(t, hub.Config{Auth: auth.Config{NativeScoped: shared, JWT: auth.VerifierConfig{Secret: secret}}})
		srv := h.Bus.Server()
		for _, tc := range []struct {
			subject string
			scopes  []string
			hubs    bool
		}{
			{"scoped", []string{"publish:orders.new", "subscribe:orders.new"}, shared},
			{"operator", []string{"admin"}, true},
		} {
			nc, err := nats.Connect(srv.ClientURL(), nats.Token(mintAs(t, tc.subject, tc.scopes...)), nats.MaxReconnects(0))
			if err != nil {
				t.Fatalf("%s refused: %v", tc.subject, err)
			}
			cz, err := srv.Connz(&server.ConnzOptions{Username: true, User: tc.subject})
			if err != nil || len(cz.Conns) != 1 {
				t.Fatalf("connz of %s: %v %+v", tc.subject, err, cz)
			}
			// connz leaves the global (the hub's) account's name out
			acc := cz.Conns[0].Account
			if inHub := acc == "" || acc == srv.GlobalAccount().Name; inHub != tc.hubs {
				t.Errorf("nativeScopedClients %v: %s is in account %s", shared, tc.subject, cz.Conns[0].Account)
			}
			nc.Close()
		}
	}
}
