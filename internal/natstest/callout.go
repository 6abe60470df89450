package natstest

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/internal/testutil"
)

// CheckCalloutAuth checks, against the NATS server at url whose auth
// callout service is a hub, what the compose files promise native clients
// when they leave nativeScopedClients off: a client without a token, with
// a wrong token or the hub's own user with a wrong password, and with the
// scoped token refused is refused; the static token admin gets the
// JetStream API: it publishes to topic with JetStream acknowledgements and
// reads its last message by subject.
func CheckCalloutAuth(t testing.TB, url, admin, refused, topic string) {
	t.Helper()
	for _, opt := range []nats.Option{nil, nats.Token("not-a-token"), nats.UserInfo("eventhub", "wrong"), nats.Token(refused)} {
		opts := []nats.Option{nats.Timeout(5 * time.Second), nats.NoReconnect()}
		if opt != nil {
			opts = append(opts, opt)
		}
		if nc, err := nats.Connect(url, opts...); err == nil {
			nc.Close()
			t.Fatalf("%s accepted a native client without a hub token with the admin scope", url)
		}
	}
	nc, err := nats.Connect(url, nats.Token(admin))
	if err != nil {
		t.Fatalf("%s: the static token: %v", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("%s: the static token's JetStream account info: %v", url, err)
	}
	payload := fmt.Sprintf(`{"native":%q}`, url)
	// Right after a cluster starts the stream may still be electing its
	// leader: a publish then gets no response, and is retried.
	testutil.CheckFor(t, 15*time.Second, func() error {
		_, err := js.Publish(ctx, topic, []byte(payload))
		return err
	})
	name, err := js.StreamNameBySubject(ctx, topic)
	if err != nil {
		t.Fatalf("%s: stream by subject: %v", url, err)
	}
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("%s: stream info: %v", url, err)
	}
	// A direct get may be answered by a replica that has not applied the
	// publish yet: it catches up within moments.
	testutil.CheckFor(t, 10*time.Second, func() error {
		m, err := s.GetLastMsgForSubject(ctx, topic)
		if err != nil {
			return fmt.Errorf("%s: last by subject: %w", url, err)
		}
		if string(m.Data) != payload {
			return fmt.Errorf("%s: last by subject is %s, want %s", url, m.Data, payload)
		}
		return nil
	})
}
