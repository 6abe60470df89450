package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
)

// TestTopicsCreate: a topic declared with "eventhub topics create" takes
// native JetStream publishes at once; an undeclared one answers them with
// "no stream" at once, not after a timeout.
func TestTopicsCreate(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	const static = "static-token-0123456789"
	h, err := hub.Start(t.Context(), hub.Config{NATS: hub.NATSConfig{DataDir: t.TempDir(), Memory: true}, Server: hub.ServerConfig{OpsPort: -1, WSPort: -1, HTTPPort: -1}, Auth: auth.Config{Token: static, JWT: auth.VerifierConfig{Secret: secret}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Shutdown(context.Background()) })
	url := h.Bus.Server().ClientURL()

	var out, errOut bytes.Buffer
	err = run(t.Context(), []string{"topics", "create", "-nats-url", url, "-nats-token", static, "orders.new", "orders.paid"}, env(nil), &out, &errOut)
	if err != nil {
		t.Fatalf("topics create: %v (%s)", err, errOut.String())
	}
	if !strings.Contains(out.String(), "orders.new\tEH_orders_new_") {
		t.Fatalf("output %q", out.String())
	}
	if err := run(t.Context(), []string{"topics", "create", "-nats-url", url, "-nats-token", static, "orders.*"}, env(nil), &out, &errOut); !errors.Is(err, facade.ErrBadTopic) {
		t.Fatalf("a pattern: %v, want ErrBadTopic", err)
	}

	tok, err := auth.MintHS256(secret, auth.MintClaims{Subject: "svc", Scopes: []string{"publish:orders.*"}, TTL: time.Minute}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, nats.Token(tok))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), "orders.paid", []byte(`{"id":1}`)); err != nil {
		t.Fatalf("publish to a declared topic: %v", err)
	}
	start := time.Now()
	_, err = js.Publish(t.Context(), "orders.undeclared", []byte(`{"id":1}`))
	if !errors.Is(err, njs.ErrNoStreamResponse) {
		t.Fatalf("publish to an undeclared topic: %v, want ErrNoStreamResponse", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the refusal took %v", d)
	}
}

// TestTopicsCreateRefusesAMissingToken: "-nats-token $WS_TOKEN t1 t2" with
// the variable unset makes t1 the token. Such a command is refused, whether
// the hub needs a token or not, and creates nothing.
func TestTopicsCreateRefusesAMissingToken(t *testing.T) {
	const static = "static-token-0123456789"
	open, err := hub.Start(t.Context(), hub.Config{NATS: hub.NATSConfig{Memory: true}, Server: hub.ServerConfig{OpsPort: -1, WSPort: -1, HTTPPort: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = open.Shutdown(context.Background()) })
	closed, err := hub.Start(t.Context(), hub.Config{NATS: hub.NATSConfig{Memory: true}, Server: hub.ServerConfig{OpsPort: -1, WSPort: -1, HTTPPort: -1}, Auth: auth.Config{Token: static}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closed.Shutdown(context.Background()) })
	for _, tc := range []struct {
		name string
		h    *hub.Hub
		args []string
		want string
	}{
		{"topic as token, hub without auth", open, []string{"-nats-token", "orders.new", "orders.paid"}, "is a topic name, not a token"},
		{"topic as token, hub with auth", closed, []string{"-nats-token", "orders.new", "orders.paid"}, "is a topic name, not a token"},
		{"a token to a hub without auth", open, []string{"-nats-token", "neworders", "orders.paid"}, "needs no credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"topics", "create", "-nats-url", tc.h.Bus.Server().ClientURL()}, tc.args...)
			var out bytes.Buffer
			err := run(t.Context(), args, env(nil), &out, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "orders.new") {
				t.Fatalf("err %v repeats what was given as the token", err)
			}
			if name, err := tc.h.Bus.JetStream().StreamNameBySubject(t.Context(), "orders.paid"); err == nil || out.Len() > 0 {
				t.Fatalf("a topic was created: %s %s", name, out.String())
			}
		})
	}
	// Without a token, the hub without auth creates the topics.
	var out bytes.Buffer
	if err := run(t.Context(), []string{"topics", "create", "-nats-url", open.Bus.Server().ClientURL(), "orders.paid"}, env(nil), &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "orders.paid\tEH_orders_paid_") {
		t.Fatalf("output %q", out.String())
	}
}
