package hub_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/client"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/internal/testutil"
)

// TestJWTLeewayIsOneRuleEverywhere: a token a second past its exp, within
// the configured leeway, is accepted on every way in (WebSocket, HTTP,
// native NATS), and the sessions it opens end at exp plus the leeway.
func TestJWTLeewayIsOneRuleEverywhere(t *testing.T) {
	const leeway = 4 * time.Second
	h := startHub(t, hub.Config{Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret, Leeway: leeway}}})
	issued := time.Now().Add(-2 * time.Second)
	tok, err := auth.MintHS256(secret, auth.MintClaims{Subject: "late", Scopes: []string{"publish:**", "subscribe:**"}, TTL: time.Second}, issued)
	if err != nil {
		t.Fatal(err)
	}
	exp := issued.Add(time.Second).Truncate(time.Second) // a NumericDate has whole seconds

	// WebSocket: AUTH is accepted and the session works.
	closed := make(chan struct{})
	c, err := client.Dial(t.Context(), "ws://"+h.Addr("ws"), client.Config{Token: tok, NoReconnect: true})
	if err != nil {
		t.Fatalf("WebSocket refused a token within the leeway: %v", err)
	}
	defer c.Close()
	if _, err := c.Publish(t.Context(), "late.ws", json.RawMessage(`1`), facade.PublishOptions{}); err != nil {
		t.Fatalf("WebSocket session ended before exp + leeway: %v", err)
	}

	// HTTP publish.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+h.Addr("http")+"/publish/late.http", strings.NewReader(`1`))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP publish within the leeway: %s", resp.Status)
	}

	// Native NATS: connects, publishes, and is closed at exp + leeway.
	nc, err := nats.Connect(h.Bus.Server().ClientURL(), nats.Token(tok), nats.NoReconnect(),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatalf("native NATS refused a token within the leeway: %v", err)
	}
	defer nc.Close()
	if err := nc.Publish("late.nats", []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("native connection ended before exp + leeway: %v", err)
	}
	select {
	case <-closed:
		if since := time.Since(exp); since < leeway-500*time.Millisecond {
			t.Fatalf("native connection closed %v after exp, before the leeway of %v", since, leeway)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("native connection outlived exp + leeway")
	}
	// The WebSocket session ended too, and not before exp + leeway.
	testutil.CheckFor(t, 10*time.Second, func() error {
		if _, err := c.Publish(t.Context(), "late.ws", json.RawMessage(`1`), facade.PublishOptions{}); err == nil {
			return errors.New("WebSocket session outlived exp + leeway")
		}
		return nil
	})
	if since := time.Since(exp); since < leeway-500*time.Millisecond {
		t.Fatalf("WebSocket session ended %v after exp, before the leeway of %v", since, leeway)
	}
}
