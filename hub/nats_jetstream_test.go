package hub_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/acl"
	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
)

const staticToken = "static-token-0123456789"

// nativeClient is a nats.go connection whose permission violations are
// collected.
type nativeClient struct {
	nc   *nats.Conn
	js   njs.JetStream
	errs chan error
}

func connectNative(t *testing.T, h *hub.Hub, token string) *nativeClient {
	t.Helper()
	c := &nativeClient{errs: make(chan error, 100)}
	nc, err := nats.Connect(h.Bus.Server().ClientURL(), nats.Token(token),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { c.errs <- err }))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	c.nc = nc
	c.js, err = njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// refused runs a JetStream call that must be refused: it fails, and the
// server reports a permissions violation for a publish to subject.
func (c *nativeClient) refused(t *testing.T, subject string, call func(ctx context.Context) error) {
	t.Helper()
	for len(c.errs) > 0 {
		<-c.errs
	}
	ctx, cancel := context.WithTimeout(t.Context(), 250*time.Millisecond)
	defer cancel()
	if err := call(ctx); err == nil {
		t.Fatalf("a call on %s succeeded", subject)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case err := <-c.errs:
			if strings.Contains(err.Error(), "Permissions Violation") && strings.Contains(err.Error(), subject) {
				return
			}
		case <-deadline:
			t.Fatalf("no permissions violation for %s", subject)
		}
	}
}

func jsHub(t *testing.T) *hub.Hub {
	return startHub(t, hub.Config{NATS: hub.NATSConfig{Memory: true}, Auth: auth.Config{Token: staticToken, JWT: auth.VerifierConfig{Secret: secret}}})
}

func publishN(t *testing.T, h *hub.Hub, topic string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := h.Bus.Publish(t.Context(), topic, fmt.Appendf(nil, `{"n":%d}`, i), facade.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// storedIn is the number of events stream holds.
func storedIn(t *testing.T, h *hub.Hub, stream string) uint64 {
	t.Helper()
	s, err := h.Bus.JetStream().Stream(t.Context(), stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	return s.CachedInfo().State.Msgs
}

// fetchAcked pulls up to n events from cons, acks each with the server's
// confirmation, and returns their subjects.
func fetchAcked(t *testing.T, cons njs.Consumer, n int, wait time.Duration) []string {
	t.Helper()
	batch, err := cons.Fetch(n, njs.FetchMaxWait(wait))
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for m := range batch.Messages() {
		subjects = append(subjects, m.Subject())
		if err := m.DoubleAck(t.Context()); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	return subjects
}

func streamOf(t *testing.T, h *hub.Hub, topic string) string {
	t.Helper()
	name, err := h.Bus.JetStream().StreamNameBySubject(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// TestNativeJetStreamScoped: a scoped token gets JetStream publishes, reads
// and the groups of its topic, and none of its neighbours.
func TestNativeJetStreamScoped(t *testing.T) {
	h := jsHub(t)
	// A group the hub made, for the native client to bind to.
	unsub, err := h.Bus.Subscribe(t.Context(), "orders.new", "native", func(context.Context, facade.Delivery) error { return nil },
		facade.SubscribeOptions{From: facade.FromEarliest})
	if err != nil {
		t.Fatal(err)
	}
	if err := unsub.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	publishN(t, h, "orders.new", 0, 3)
	publishN(t, h, "orders.old", 0, 1)
	own, other := streamOf(t, h, "orders.new"), streamOf(t, h, "orders.old")
	c := connectNative(t, h, mint(t, time.Minute, "publish:orders.new", "subscribe:orders.new"))
	ctx := t.Context()

	if _, err := c.js.Publish(ctx, "orders.new", []byte(`{"n":3}`)); err != nil {
		t.Fatalf("js.Publish: %v", err)
	}
	if name, err := c.js.StreamNameBySubject(ctx, "orders.new"); err != nil || name != own {
		t.Fatalf("stream by subject: %q %v", name, err)
	}
	s, err := c.js.Stream(ctx, own)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	if m, err := s.GetLastMsgForSubject(ctx, "orders.new"); err != nil || string(m.Data) != `{"n":3}` {
		t.Fatalf("last by subject: %v", err)
	}
	if m, err := s.GetMsg(ctx, 1); err != nil || string(m.Data) != `{"n":0}` {
		t.Fatalf("get by sequence: %v", err)
	}
	// The hub's group, bound to, read and acked natively.
	group := jetstream.ConsumerName("native", "orders.new", false)
	cons, err := c.js.Consumer(ctx, own, group)
	if err != nil {
		t.Fatalf("bind to the group: %v", err)
	}
	if got := fetchAcked(t, cons, 4, 5*time.Second); len(got) != 4 {
		t.Fatalf("fetched %v, want 4 events", got)
	}

	// No consumer is made, changed or deleted natively: a push consumer
	// would deliver the topic to any subject it names (another topic's
	// stream, an inbox) and outlive the token; deleting a group destroys
	// its cursor.
	c.refused(t, "$JS.API.CONSUMER.CREATE."+own, func(ctx context.Context) error {
		_, err := s.CreateOrUpdateConsumer(ctx, njs.ConsumerConfig{Durable: "mine", AckPolicy: njs.AckExplicitPolicy})
		return err
	})
	c.refused(t, "$JS.API.CONSUMER.CREATE."+own, func(ctx context.Context) error {
		_, err := c.js.CreateOrUpdatePushConsumer(ctx, own, njs.ConsumerConfig{Durable: "push", DeliverSubject: "orders.old", AckPolicy: njs.AckNonePolicy})
		return err
	})
	c.refused(t, "$JS.API.CONSUMER.CREATE."+own, func(ctx context.Context) error {
		_, err := s.OrderedConsumer(ctx, njs.OrderedConsumerConfig{})
		return err
	})
	c.refused(t, "$JS.API.CONSUMER.DELETE."+own+"."+group, func(ctx context.Context) error { return s.DeleteConsumer(ctx, group) })

	// Neighbours are refused.
	c.refused(t, "$JS.API.STREAM.INFO."+other, func(ctx context.Context) error { _, err := c.js.Stream(ctx, other); return err })
	c.refused(t, "$JS.API.DIRECT.GET."+other, func(ctx context.Context) error {
		_, err := c.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+other+".orders.old", nil)
		return err
	})
	c.refused(t, "$JS.API.CONSUMER.CREATE."+other, func(ctx context.Context) error {
		_, err := c.js.CreateOrUpdateConsumer(ctx, other, njs.ConsumerConfig{Durable: "x"})
		return err
	})
	c.refused(t, "$JS.API.STREAM.DELETE."+own, func(ctx context.Context) error { return c.js.DeleteStream(ctx, own) })
	c.refused(t, "$JS.API.STREAM.PURGE."+own, func(ctx context.Context) error { return s.Purge(ctx) })
	c.refused(t, "$JS.API.STREAM.CREATE.", func(ctx context.Context) error {
		_, err := c.js.CreateStream(ctx, njs.StreamConfig{Name: "MINE", Subjects: []string{"orders.new.>"}})
		return err
	})
	c.refused(t, "$JS.API.INFO", func(ctx context.Context) error { _, err := c.js.AccountInfo(ctx); return err })
	c.refused(t, "$JS.API.STREAM.LIST", func(ctx context.Context) error {
		_, err := c.nc.RequestWithContext(ctx, "$JS.API.STREAM.LIST", nil)
		return err
	})
	c.refused(t, "$JS.API.>", func(ctx context.Context) error {
		_, err := c.nc.RequestWithContext(ctx, "$JS.API.>", nil)
		return err
	})
	c.refused(t, "$KV.", func(ctx context.Context) error {
		_, err := c.nc.RequestWithContext(ctx, "$KV.b.k", nil)
		return err
	})
}

// TestNativeJetStreamGroupRestricted: a rule restricted to groups grants
// those groups' consumers only, and no direct reads.
func TestNativeJetStreamGroupRestricted(t *testing.T) {
	h := jsHub(t)
	for _, g := range []string{"g1", "g2"} {
		unsub, err := h.Bus.Subscribe(t.Context(), "orders.new", g, func(context.Context, facade.Delivery) error {
			return nil
		}, facade.SubscribeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := unsub.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	publishN(t, h, "orders.new", 0, 2)
	own := streamOf(t, h, "orders.new")
	pol := acl.Policy{Rules: []acl.Rule{{Effect: acl.EffectAllow, Action: acl.ActionSubscribe, Topics: []string{"orders.*"}, Groups: []string{"g1", "g3"}}}}
	tok, err := auth.MintHS256(secret, auth.MintClaims{Subject: "worker", Policy: &pol, TTL: time.Minute}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := connectNative(t, h, tok)
	ctx := t.Context()
	g1 := jetstream.ConsumerName("g1", "orders.new", false)
	cons, err := c.js.Consumer(ctx, own, g1)
	if err != nil {
		t.Fatalf("bind to g1: %v", err)
	}
	if got := fetchAcked(t, cons, 2, 5*time.Second); len(got) != 2 {
		t.Fatalf("g1 delivered %v, want 2 events", got)
	}
	// Groups are made through the hub, and deleted by operators only.
	g3 := jetstream.ConsumerName("g3", "orders.new", false)
	c.refused(t, "$JS.API.CONSUMER.CREATE."+own+"."+g3, func(ctx context.Context) error {
		_, err := c.js.CreateOrUpdateConsumer(ctx, own, njs.ConsumerConfig{Durable: g3, AckPolicy: njs.AckExplicitPolicy})
		return err
	})
	c.refused(t, "$JS.API.CONSUMER.DELETE."+own+"."+g1, func(ctx context.Context) error { return c.js.DeleteConsumer(ctx, own, g1) })
	g2 := jetstream.ConsumerName("g2", "orders.new", false)
	c.refused(t, "$JS.API.CONSUMER.INFO."+own+"."+g2, func(ctx context.Context) error { _, err := c.js.Consumer(ctx, own, g2); return err })
	c.refused(t, "$JS.API.CONSUMER.MSG.NEXT."+own+"."+g2, func(ctx context.Context) error {
		_, err := c.nc.RequestWithContext(ctx, "$JS.API.CONSUMER.MSG.NEXT."+own+"."+g2, []byte(`{"batch":1}`))
		return err
	})
	c.refused(t, "$JS.API.CONSUMER.DELETE."+own+"."+g2, func(ctx context.Context) error { return c.js.DeleteConsumer(ctx, own, g2) })
	c.refused(t, "$JS.API.DIRECT.GET."+own, func(ctx context.Context) error {
		_, err := c.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+own+".orders.new", nil)
		return err
	})
	c.refused(t, "$JS.API.CONSUMER.CREATE."+own+".eph", func(ctx context.Context) error {
		_, err := c.js.CreateOrUpdateConsumer(ctx, own, njs.ConsumerConfig{Name: "eph"})
		return err
	})
}

// TestNativeJetStreamConsumerSharesHubGroup: a nats.go consumer bound to a
// hub group and a hub member of that group share its events: each event
// is delivered once, and the group's cursor moves past all of them.
func TestNativeJetStreamConsumerSharesHubGroup(t *testing.T) {
	h := jsHub(t)
	const topic, group, total = "jobs.run", "workers", 40
	var mu sync.Mutex
	seen := map[int]string{}
	record := func(who string, data []byte) error {
		var v struct{ N int }
		if err := json.Unmarshal(data, &v); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if prev, dup := seen[v.N]; dup {
			return fmt.Errorf("event %d delivered to %s and to %s", v.N, prev, who)
		}
		seen[v.N] = who
		return nil
	}
	dup := make(chan error, total)
	// The hub member holds one event at a time and keeps its first until
	// the native member has had one, so both get work whoever pulls first.
	nativeGot := make(chan struct{})
	var nativeOnce sync.Once
	handler := func(ctx context.Context, dl facade.Delivery) error {
		e := dl.Event()
		select {
		case <-nativeGot:
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		if err := record("hub", e.Payload); err != nil {
			dup <- err
		}
		return nil
	}
	unsub, err := h.Bus.Subscribe(t.Context(), topic, group, handler, facade.SubscribeOptions{MaxInFlight: 1, GroupMaxInFlight: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unsub.Stop(context.Background()) }()

	c := connectNative(t, h, mint(t, time.Minute, "subscribe:jobs.*"))
	stream := streamOf(t, h, topic)
	cons, err := c.js.Consumer(t.Context(), stream, jetstream.ConsumerName(group, topic, false))
	if err != nil {
		t.Fatalf("bind to the hub's group: %v", err)
	}
	cc, err := cons.Consume(func(m njs.Msg) {
		if err := record("native", m.Data()); err != nil {
			dup <- err
		}
		_ = m.Ack()
		nativeOnce.Do(func() { close(nativeGot) })
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	// Both members' pulls wait on the group before the events arrive, so
	// that the hub member's larger pull cannot take every event first.
	testutil.CheckFor(t, 10*time.Second, func() error {
		ci, err := cons.Info(t.Context())
		if err != nil {
			return err
		}
		if ci.NumWaiting < 2 {
			return fmt.Errorf("%d pulls waiting on the group, want both members'", ci.NumWaiting)
		}
		return nil
	})
	publishN(t, h, topic, 0, total)
	testutil.CheckFor(t, 20*time.Second, func() error {
		select {
		case err := <-dup:
			return err
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != total {
			return fmt.Errorf("%d of %d events delivered", len(seen), total)
		}
		return nil
	})
	select {
	case err := <-dup:
		t.Fatal(err)
	default:
	}
	// The group's cursor is past every event, whoever acked it.
	testutil.CheckFor(t, 10*time.Second, func() error {
		info, err := h.Bus.JetStream().Consumer(t.Context(), stream, jetstream.ConsumerName(group, topic, false))
		if err != nil {
			return err
		}
		ci := info.CachedInfo()
		if ci.AckFloor.Stream != total || ci.NumAckPending != 0 || ci.NumPending != 0 {
			return fmt.Errorf("ack floor %d, pending acks %d, pending %d", ci.AckFloor.Stream, ci.NumAckPending, ci.NumPending)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	counts := map[string]int{}
	for _, who := range seen {
		counts[who]++
	}
	if counts["hub"] == 0 || counts["native"] == 0 {
		t.Fatalf("the work was not shared: %v", counts)
	}
}

// TestNativeJetStreamAdmin: the all-access static token and the admin scope
// get the whole JetStream API; the hub's inboxes stay closed.
func TestNativeJetStreamAdmin(t *testing.T) {
	h := jsHub(t)
	for _, tc := range []struct{ name, token string }{
		{"static token", staticToken},
		{"admin scope", mint(t, time.Minute, "admin")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := connectNative(t, h, tc.token)
			ctx := t.Context()
			if _, err := c.js.AccountInfo(ctx); err != nil {
				t.Fatalf("account info: %v", err)
			}
			name := "ADMIN_" + strings.ReplaceAll(tc.name, " ", "_")
			if _, err := c.js.CreateStream(ctx, njs.StreamConfig{Name: name, Subjects: []string{"adm." + name}, Storage: njs.MemoryStorage}); err != nil {
				t.Fatalf("create stream: %v", err)
			}
			if _, err := c.js.Publish(ctx, "adm."+name, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			if err := c.js.DeleteStream(ctx, name); err != nil {
				t.Fatalf("delete stream: %v", err)
			}
			c.refused(t, "Subscription to", func(context.Context) error {
				_, _ = c.nc.SubscribeSync(h.Bus.Conn().Opts.InboxPrefix + ".>")
				_ = c.nc.Flush()
				return errors.New("refused asynchronously")
			})
			c.refused(t, "$SYS.REQ", func(ctx context.Context) error {
				_, err := c.nc.RequestWithContext(ctx, "$SYS.REQ.SERVER.PING", nil)
				return err
			})
		})
	}
}

// TestNativeJetStreamFamilyStream: on a stream that holds a family of
// topics, a token for one topic reads that topic's last events and joins
// its hub groups, never the family's other topics.
func TestNativeJetStreamFamilyStream(t *testing.T) {
	h := startHub(t, hub.Config{NATS: hub.NATSConfig{Memory: true}, Auth: auth.Config{Token: staticToken, JWT: auth.VerifierConfig{Secret: secret}}, Bus: jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "audit.>", Stream: "AUDIT"}}}})
	unsub, err := h.Bus.Subscribe(t.Context(), "audit.login", "g", func(context.Context, facade.Delivery) error {
		return nil
	}, facade.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unsub.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	publishN(t, h, "audit.login", 0, 2)
	publishN(t, h, "audit.logout", 0, 1)
	c := connectNative(t, h, mint(t, time.Minute, "subscribe:audit.login"))
	ctx := t.Context()
	// The last event of its topic, by a direct get (nats.go's Stream handle
	// needs the stream's info, which is not granted on a shared stream).
	if m, err := c.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET.AUDIT.audit.login", nil); err != nil || string(m.Data) != `{"n":1}` {
		t.Fatalf("last by subject: %v", err)
	}
	name := jetstream.ConsumerName("g", "audit.login", true)
	cons, err := c.js.Consumer(ctx, "AUDIT", name)
	if err != nil {
		t.Fatalf("bind to the hub's group: %v", err)
	}
	if got := fetchAcked(t, cons, 5, time.Second); len(got) != 2 || got[0] != "audit.login" || got[1] != "audit.login" {
		t.Fatalf("the group delivered %v, want audit.login twice", got)
	}
	request := func(subject string, body []byte) func(ctx context.Context) error {
		return func(ctx context.Context) error { _, err := c.nc.RequestWithContext(ctx, subject, body); return err }
	}
	c.refused(t, "$JS.API.DIRECT.GET.AUDIT.audit.logout", request("$JS.API.DIRECT.GET.AUDIT.audit.logout", nil))
	c.refused(t, "$JS.API.DIRECT.GET.AUDIT", request("$JS.API.DIRECT.GET.AUDIT", []byte(`{"seq":1}`)))
	// The stream's info lists every subject on it: the other topics, and
	// the keys of their events.
	c.refused(t, "$JS.API.STREAM.INFO.AUDIT", func(ctx context.Context) error { _, err := c.js.Stream(ctx, "AUDIT"); return err })
	c.refused(t, "$JS.API.CONSUMER.CREATE.AUDIT", func(ctx context.Context) error {
		_, err := c.js.CreateOrUpdateConsumer(ctx, "AUDIT", njs.ConsumerConfig{Durable: name, FilterSubject: "audit.>"})
		return err
	})
	c.refused(t, "$JS.API.CONSUMER.DELETE.AUDIT", func(ctx context.Context) error { return c.js.DeleteConsumer(ctx, "AUDIT", name) })
}

// TestNativeJetStreamWildcardGroup: a hub group over a pattern of a family
// is one consumer a native client may join when its policy covers the
// whole pattern, and not with a right on one of its topics.
func TestNativeJetStreamWildcardGroup(t *testing.T) {
	h := startHub(t, hub.Config{NATS: hub.NATSConfig{Memory: true}, Auth: auth.Config{Token: staticToken, JWT: auth.VerifierConfig{Secret: secret}}, Bus: jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "audit.**", Stream: "AUDIT"}}}})
	unsub, err := h.Bus.Subscribe(t.Context(), "audit.*", "g", func(context.Context, facade.Delivery) error {
		return nil
	}, facade.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unsub.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	publishN(t, h, "audit.login", 0, 1)
	publishN(t, h, "audit.logout", 0, 1)
	publishN(t, h, "audit.login.failed", 0, 1) // not matched by audit.*
	name := jetstream.ConsumerName("g", "audit.*", true)
	ctx := t.Context()

	c := connectNative(t, h, mint(t, time.Minute, "subscribe:audit.**"))
	cons, err := c.js.Consumer(ctx, "AUDIT", name)
	if err != nil {
		t.Fatalf("bind to the hub's wildcard group: %v", err)
	}
	subjects := fetchAcked(t, cons, 5, time.Second)
	if len(subjects) != 2 || subjects[0] != "audit.login" || subjects[1] != "audit.logout" {
		t.Fatalf("the wildcard group delivered %v", subjects)
	}

	narrow := connectNative(t, h, mint(t, time.Minute, "subscribe:audit.login"))
	narrow.refused(t, "$JS.API.CONSUMER.INFO.AUDIT."+name, func(ctx context.Context) error {
		_, err := narrow.js.Consumer(ctx, "AUDIT", name)
		return err
	})
}

// TestNativeJetStreamPublishOnly: a token that may only publish gets
// acknowledged publishes and nothing that reads: not even its stream's
// info, which lists the keys of the topic's events.
func TestNativeJetStreamPublishOnly(t *testing.T) {
	h := jsHub(t)
	if _, err := h.Bus.Publish(t.Context(), "orders.new", []byte(`{}`), facade.PublishOptions{Key: "alice@example.com"}); err != nil {
		t.Fatal(err)
	}
	own := streamOf(t, h, "orders.new")
	c := connectNative(t, h, mint(t, time.Minute, "publish:orders.new"))
	if _, err := c.js.Publish(t.Context(), "orders.new", []byte(`{"n":1}`)); err != nil {
		t.Fatalf("js.Publish: %v", err)
	}
	c.refused(t, "$JS.API.STREAM.INFO."+own, func(ctx context.Context) error { _, err := c.js.Stream(ctx, own); return err })
}

// TestNativePolicyNamingSystemSubjectsIsRefused: topics never begin with
// "$" or "_", so a rule naming such subjects grants nothing over WebSocket
// or HTTP; natively it would open the JetStream API or inboxes, so a token
// carrying one is refused at connect.
func TestNativePolicyNamingSystemSubjectsIsRefused(t *testing.T) {
	h := jsHub(t)
	publishN(t, h, "victim.topic", 0, 1)
	for _, scope := range []string{"publish:$JS.API.STREAM.DELETE.**", "subscribe:_INBOX.**", "publish:$KV.**"} {
		nc, err := nats.Connect(h.Bus.Server().ClientURL(), nats.Token(mint(t, time.Minute, scope)), nats.MaxReconnects(0))
		if err == nil {
			nc.Close()
			t.Fatalf("a token with %q connected", scope)
		}
		if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Fatalf("%q: %v, want an authorization violation", scope, err)
		}
	}
}
