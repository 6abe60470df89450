package hub_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/internal/natstest"
)

// TestAuthCalloutExternalServer: a separate nats-server configured with
// deploy/nats/callout.conf asks the hub about every native client: a
// scoped token gets exactly its rights, JetStream included, and a client
// without a valid token is refused.
func TestAuthCalloutExternalServer(t *testing.T) {
	akp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := akp.Seed()
	issuer, _ := akp.PublicKey()
	const password = "hub-password-0123456789"
	p := natstest.StartProcessConfig(t, "../deploy/nats/callout.conf",
		[]string{"EVENTHUB_NATS_PASSWORD=" + password, "EVENTHUB_CALLOUT_ISSUER=" + issuer},
		nats.UserInfo("eventhub", password))
	h := startHub(t, hub.Config{NATS: hub.NATSConfig{URL: p.URL(), User: "eventhub", Password: password, CalloutSeed: string(seed)}, Server: hub.ServerConfig{OpsPort: -1, WSPort: -1, HTTPPort: -1}, Auth: auth.Config{Token: staticToken, NativeScoped: true, JWT: auth.VerifierConfig{Secret: secret}}})
	if _, err := h.Bus.Publish(t.Context(), "orders.new", []byte(`{"n":0}`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Bus.Publish(t.Context(), "orders.old", []byte(`{"n":0}`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, opt := range []nats.Option{nil, nats.Token("not-a-jwt"), nats.UserInfo("eventhub", "wrong")} {
		opts := []nats.Option{nats.Timeout(2 * time.Second)}
		if opt != nil {
			opts = append(opts, opt)
		}
		if nc, err := nats.Connect(p.URL(), opts...); err == nil {
			nc.Close()
			t.Fatal("a client without a valid token was accepted")
		}
	}

	c := &nativeClient{errs: make(chan error, 100)}
	nc, err := nats.Connect(p.URL(), nats.Token(mint(t, time.Minute, "publish:orders.new", "subscribe:orders.new")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { c.errs <- err }))
	if err != nil {
		t.Fatalf("a scoped token was refused: %v", err)
	}
	defer nc.Close()
	c.nc = nc
	c.js, _ = njs.New(nc)
	ctx := t.Context()
	if _, err := c.js.Publish(ctx, "orders.new", []byte(`{"n":1}`)); err != nil {
		t.Fatalf("js.Publish: %v", err)
	}
	own := streamOf(t, h, "orders.new")
	s, err := c.js.Stream(ctx, own)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	if m, err := s.GetLastMsgForSubject(ctx, "orders.new"); err != nil || string(m.Data) != `{"n":1}` {
		t.Fatalf("last by subject: %v", err)
	}
	c.refused(t, "Publish to \"orders.old\"", func(ctx context.Context) error {
		_, err := c.js.Publish(ctx, "orders.old", []byte(`{}`))
		return err
	})
	other := streamOf(t, h, "orders.old")
	c.refused(t, "$JS.API.STREAM.INFO."+other, func(ctx context.Context) error { _, err := c.js.Stream(ctx, other); return err })
	c.refused(t, "$JS.API.STREAM.DELETE."+own, func(ctx context.Context) error { return c.js.DeleteStream(ctx, own) })
	c.refused(t, "$JS.API.INFO", func(ctx context.Context) error { _, err := c.js.AccountInfo(ctx); return err })

	// The static token is an operator on the external server too.
	adm, err := nats.Connect(p.URL(), nats.Token(staticToken))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ajs, _ := njs.New(adm)
	if _, err := ajs.AccountInfo(ctx); err != nil {
		t.Fatalf("admin account info: %v", err)
	}
	if _, err := ajs.Publish(ctx, "orders.undeclared", nil); !errors.Is(err, njs.ErrNoStreamResponse) {
		t.Fatalf("undeclared topic: %v", err)
	}
}
