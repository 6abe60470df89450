package jetstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
)

// TestExternalOutageIsLoggedAndFailsFast: losing the external server is
// logged (and its return, with how long it was down), and publishes made
// meanwhile fail with unavailable after DisconnectedWait instead of hanging
// for the request timeout.
func TestExternalOutageIsLoggedAndFailsFast(t *testing.T) {
	p := natstest.StartProcess(t)
	var logs testutil.Buffer
	b, err := jetstream.Open(t.Context(), jetstream.OpenConfig{
		URL:         p.URL(),
		NATSOptions: []nats.Option{nats.ReconnectWait(100 * time.Millisecond)},
		Bus: jetstream.Config{
			Logger:           slog.New(slog.NewTextHandler(&logs, nil)),
			RequestTimeout:   10 * time.Second,
			DisconnectedWait: 500 * time.Millisecond,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pub(t, b, "outage.t", `1`, "")

	p.Stop()
	testutil.CheckFor(t, 10*time.Second, func() error {
		if !strings.Contains(logs.String(), "NATS connection lost") {
			return errors.New("no log of the lost connection")
		}
		return nil
	})
	logNamesServer(t, logs.String(), "NATS connection lost", p.URL())
	start := time.Now()
	_, err = b.Publish(context.Background(), "outage.t", json.RawMessage(`2`), facade.PublishOptions{})
	if !errors.Is(err, facade.ErrUnavailable) {
		t.Fatalf("publish while down: %v, want unavailable", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("publish while down failed after %v, not within DisconnectedWait", d)
	}

	p.Start()
	testutil.CheckFor(t, 15*time.Second, func() error {
		if !strings.Contains(logs.String(), "NATS connection restored") || !strings.Contains(logs.String(), "down_for=") {
			return errors.New("no log of the restored connection")
		}
		return nil
	})
	logNamesServer(t, logs.String(), "NATS connection restored", p.URL())
	testutil.CheckFor(t, 10*time.Second, func() error {
		_, err := b.Publish(t.Context(), "outage.t", json.RawMessage(`3`), facade.PublishOptions{})
		return err
	})
}

// logNamesServer checks that the log line with msg names the server at
// serverURL.
func logNamesServer(t *testing.T, logs, msg, serverURL string) {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, msg) {
			if !strings.Contains(line, "server=") || !strings.Contains(line, u.Host) {
				t.Errorf("the log does not name the server %s: %s", u.Host, line)
			}
			return
		}
	}
	t.Errorf("no log line %q", msg)
}
