package hub_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/jetstream"
)

// mintAs is a token for principal subject with scopes.
func mintAs(t *testing.T, subject string, scopes ...string) string {
	t.Helper()
	tok, err := auth.MintHS256(secret, auth.MintClaims{Subject: subject, Scopes: scopes, TTL: time.Minute}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// quiet asserts that sub receives nothing for a short while: what it could
// have received was sent before the caller's last round trip.
func quiet(t *testing.T, sub *nats.Subscription, what string) {
	t.Helper()
	if m, err := sub.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("%s: received %s %q", what, m.Subject, m.Data)
	}
}

// TestNativeRepliesStayInTheClientsAccount: NATS checks the subject a
// client publishes to, not the reply subject it names. A scoped client
// whose publish or JetStream request names another topic (or the
// JetStream API) as its reply subject must not have the server write the
// answer there.
func TestNativeRepliesStayInTheClientsAccount(t *testing.T) {
	h := startHub(t, hub.Config{Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}})
	ctx := t.Context()
	for _, topic := range []string{"orders.new", "billing.paid"} {
		if _, err := h.Bus.Publish(ctx, topic, []byte(`{"n":0}`), facade.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	own, billing := streamOf(t, h, "orders.new"), streamOf(t, h, "billing.paid")

	admin := connectNative(t, h, mintAs(t, "ops", "admin")).nc
	watch, err := admin.SubscribeSync("billing.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Flush(); err != nil {
		t.Fatal(err)
	}

	c := connectNative(t, h, mintAs(t, "app", "publish:orders.new", "subscribe:orders.new"))
	attempts := []*nats.Msg{
		{Subject: "orders.new", Reply: "billing.paid", Data: []byte(`{"n":1}`)},
		{Subject: "orders.new", Reply: "$JS.API.STREAM.DELETE." + billing, Data: []byte(`{"n":2}`)},
		{Subject: "$JS.API.STREAM.INFO." + own, Reply: "billing.paid"},
		{Subject: "$JS.API.DIRECT.GET." + own + ".orders.new", Reply: "billing.paid"},
		{Subject: "$JS.API.DIRECT.GET." + own + ".orders.new", Reply: "$JS.API.STREAM.PURGE." + billing},
	}
	for _, m := range attempts {
		if err := c.nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	// The client's own acknowledged publish comes back after the attempts'
	// answers were sent.
	if _, err := c.js.Publish(ctx, "orders.new", []byte(`{"n":3}`)); err != nil {
		t.Fatalf("js.Publish: %v", err)
	}
	quiet(t, watch, "another topic")
	if n := storedIn(t, h, billing); n != 1 {
		t.Fatalf("the other topic's stream holds %d events, want its 1", n)
	}
	if n := storedIn(t, h, own); n != 4 {
		t.Fatalf("the client's topic holds %d events, want 4", n)
	}
}

// TestNativeInboxesArePrivate: the replies a native client gets (acks of
// its publishes, pulled events, direct gets) reach no other principal, even
// one with the same rights subscribed to _INBOX.>, nor do the replies of an
// admin client.
func TestNativeInboxesArePrivate(t *testing.T) {
	h := startHub(t, hub.Config{Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}})
	ctx := t.Context()
	const topic, group = "orders.new", "workers"
	sub, err := h.Bus.Subscribe(ctx, topic, group, func(context.Context, facade.Delivery) error { return nil },
		facade.SubscribeOptions{From: facade.FromEarliest})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	publishN(t, h, topic, 0, 3)
	scopes := []string{"publish:orders.new", "subscribe:orders.new"}
	var sniffers []*nats.Subscription
	for _, who := range []string{"sniffer", "neighbour"} {
		s := scopes
		if who == "sniffer" {
			s = []string{"subscribe:orders.other"}
		}
		nc := connectNative(t, h, mintAs(t, who, s...)).nc
		in, err := nc.SubscribeSync("_INBOX.>")
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		sniffers = append(sniffers, in)
	}

	js := connectNative(t, h, mintAs(t, "app", scopes...)).js
	if _, err := js.Publish(ctx, topic, []byte(`{"n":9}`)); err != nil {
		t.Fatalf("js.Publish: %v", err)
	}
	stream := streamOf(t, h, topic)
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetLastMsgForSubject(ctx, topic); err != nil {
		t.Fatalf("last by subject: %v", err)
	}
	cons, err := js.Consumer(ctx, stream, jetstream.ConsumerName(group, topic, false))
	if err != nil {
		t.Fatalf("bind to the group: %v", err)
	}
	if got := fetchAcked(t, cons, 4, 5*time.Second); len(got) != 4 {
		t.Fatalf("pulled %v, want 4 events", got)
	}
	// An admin's replies stay private too.
	if _, err := connectNative(t, h, mintAs(t, "ops", "admin")).js.AccountInfo(ctx); err != nil {
		t.Fatal(err)
	}
	for i, in := range sniffers {
		quiet(t, in, []string{"a principal with other rights", "a principal with the same rights"}[i])
	}
}

// TestNativeAccountGrowsWithTopics: a principal's connections share one
// account, and one made after a new topic appeared reaches it (the
// account takes the new imports), beside the first.
func TestNativeAccountGrowsWithTopics(t *testing.T) {
	h := startHub(t, hub.Config{Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}})
	ctx := t.Context()
	srv := h.Bus.Server()
	publishN(t, h, "orders.a", 0, 1)
	tok := mintAs(t, "reader", "subscribe:orders.*")
	first := connectNative(t, h, tok)
	publishN(t, h, "orders.b", 0, 1)
	second := connectNative(t, h, tok)
	cz, err := srv.Connz(&server.ConnzOptions{Username: true, User: "reader"})
	if err != nil || len(cz.Conns) != 2 || cz.Conns[0].Account != cz.Conns[1].Account {
		t.Fatalf("the principal's connections: %v %+v", err, cz)
	}
	for i, c := range []*nativeClient{first, second} {
		s, err := c.js.Stream(ctx, streamOf(t, h, "orders.a"))
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		if _, err := s.GetLastMsgForSubject(ctx, "orders.a"); err != nil {
			t.Fatalf("connection %d, orders.a: %v", i, err)
		}
	}
	s, err := second.js.Stream(ctx, streamOf(t, h, "orders.b"))
	if err != nil {
		t.Fatalf("the newer topic's stream: %v", err)
	}
	if m, err := s.GetLastMsgForSubject(ctx, "orders.b"); err != nil || string(m.Data) != `{"n":0}` {
		t.Fatalf("the newer topic: %v", err)
	}
}

// TestNativeRequestsLeaveNothingBehind: every request a scoped client makes
// crosses an import, and the hub's account keeps a mapping for its answer;
// answered direct gets must not leave theirs for the server's response
// threshold (minutes), or a client reading in a loop fills the memory.
func TestNativeRequestsLeaveNothingBehind(t *testing.T) {
	h := startHub(t, hub.Config{Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}})
	ctx := t.Context()
	publishN(t, h, "orders.new", 0, 1)
	js := connectNative(t, h, mintAs(t, "reader", "subscribe:orders.new")).js
	s, err := js.Stream(ctx, streamOf(t, h, "orders.new"))
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if _, err := s.GetLastMsgForSubject(ctx, "orders.new"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetMsg(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	az, err := h.Bus.Server().Accountz(&server.AccountzOptions{Account: h.Bus.Server().GlobalAccount().Name})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(az.Account.Responses); n > 10 {
		t.Fatalf("the hub's account holds %d answered responses after 200 direct gets", n)
	}
}

// TestNativeTokenWithoutSubjectRefused: scoped tokens without a subject
// would share an account, and its inbox, with every other such token of
// the same policy; they are refused natively (not over WebSocket or HTTP).
func TestNativeTokenWithoutSubjectRefused(t *testing.T) {
	h := startHub(t, hub.Config{Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}})
	if nc, err := nats.Connect(h.Bus.Server().ClientURL(), nats.Token(mintAs(t, "", "subscribe:orders.new")), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a scoped token without a subject connected natively")
	}
	nc, err := nats.Connect(h.Bus.Server().ClientURL(), nats.Token(mintAs(t, "", "admin")), nats.MaxReconnects(0))
	if err != nil {
		t.Fatalf("an admin token without a subject: %v", err)
	}
	nc.Close()
}

// TestNativeReaderCannotPullFromLiveSessions: a token that may read a topic
// binds to its groups, but not to the consumers without acks the hub reads
// live sessions with (an ordered consumer here), whose events it would
// take from another client; a group made after it connected is its on its
// next connection.
func TestNativeReaderCannotPullFromLiveSessions(t *testing.T) {
	h := jsHub(t)
	ctx := t.Context()
	const topic = "orders.new"
	sub, err := h.Bus.Subscribe(ctx, topic, "early", func(context.Context, facade.Delivery) error { return nil }, facade.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stream := streamOf(t, h, topic)
	ordered, err := h.Bus.JetStream().CreateConsumer(ctx, stream, njs.ConsumerConfig{Name: "live-session", AckPolicy: njs.AckNonePolicy})
	if err != nil {
		t.Fatal(err)
	}
	tok := mintAs(t, "reader", "subscribe:"+topic)
	c := connectNative(t, h, tok)
	if _, err := c.js.Consumer(ctx, stream, jetstream.ConsumerName("early", topic, false)); err != nil {
		t.Fatalf("bind to a group: %v", err)
	}
	name := ordered.CachedInfo().Name
	c.refused(t, "$JS.API.CONSUMER.MSG.NEXT."+stream+"."+name, func(ctx context.Context) error {
		_, err := c.nc.RequestWithContext(ctx, "$JS.API.CONSUMER.MSG.NEXT."+stream+"."+name, []byte(`{"batch":1,"no_wait":true}`))
		return err
	})
	// A push consumer with acks is its deliver subject's, not a group.
	if _, err := h.Bus.JetStream().CreateOrUpdatePushConsumer(ctx, stream, njs.ConsumerConfig{Durable: "pushed", DeliverSubject: "elsewhere.x", AckPolicy: njs.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	pushReader := connectNative(t, h, tok)
	pushReader.refused(t, "$JS.API.CONSUMER.INFO."+stream+".pushed", func(ctx context.Context) error {
		_, err := pushReader.js.Consumer(ctx, stream, "pushed")
		return err
	})
	sub, err = h.Bus.Subscribe(ctx, topic, "late", func(context.Context, facade.Delivery) error { return nil }, facade.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	again := connectNative(t, h, tok)
	if _, err := again.js.Consumer(ctx, stream, jetstream.ConsumerName("late", topic, false)); err != nil {
		t.Fatalf("bind to a group made before this connection: %v", err)
	}
}

// TestNativeStreamLookupListsOwnTopics: a stream lookup by subject
// (nats.go StreamNameBySubject, nats.js streams.find) finds the client's
// topics and no other: JetStream itself would list any topic's stream,
// and every stream without a filter.
func TestNativeStreamLookupListsOwnTopics(t *testing.T) {
	h := jsHub(t)
	ctx := t.Context()
	for _, topic := range []string{"orders.new", "billing.paid", "orders.secret"} {
		publishN(t, h, topic, 0, 1)
	}
	c := connectNative(t, h, mintAs(t, "app", "publish:orders.new", "subscribe:orders.new"))
	name, err := c.js.StreamNameBySubject(ctx, "orders.new")
	if err != nil || name != streamOf(t, h, "orders.new") {
		t.Fatalf("own topic: %q %v", name, err)
	}
	for _, other := range []string{"billing.paid", "orders.secret", "orders.*"} {
		if name, err := c.js.StreamNameBySubject(ctx, other); err == nil && name != streamOf(t, h, "orders.new") {
			t.Fatalf("lookup of %s found %s", other, name)
		}
	}
	resp, err := c.nc.RequestWithContext(ctx, "$JS.API.STREAM.NAMES", nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(resp.Data), streamOf(t, h, "billing.paid")) || !strings.Contains(string(resp.Data), streamOf(t, h, "orders.new")) {
		t.Fatalf("unfiltered lookup: %s", resp.Data)
	}

	// Pages count the client's streams only.
	reader := connectNative(t, h, mintAs(t, "reader", "subscribe:orders.*"))
	var page struct {
		Total, Offset int
		Streams       []string
	}
	resp, err = reader.nc.RequestWithContext(ctx, "$JS.API.STREAM.NAMES", []byte(`{"offset":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(resp.Data, &page); err != nil || page.Total != 2 || page.Offset != 1 || len(page.Streams) != 1 {
		t.Fatalf("second page of two streams: %s (%v)", resp.Data, err)
	}

	// The lookups are the hub's to answer: an admin may not listen in.
	admin := connectNative(t, h, mintAs(t, "ops", "admin"))
	if _, err := admin.nc.SubscribeSync("_EHAPI.>"); err != nil {
		t.Fatal(err)
	}
	admin.nc.Flush()
	waitErr(t, admin.errs, "Subscription to \"_EHAPI.>\"")
}

// TestHubShutdownTwice: a second Shutdown, after the stream lookups'
// connection closed, is not an error.
func TestHubShutdownTwice(t *testing.T) {
	h := startHub(t, hub.Config{Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}})
	if err := h.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := h.Shutdown(t.Context()); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
}
