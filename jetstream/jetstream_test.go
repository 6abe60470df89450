package jetstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
)

func TestMain(m *testing.M) {
	os.Exit(testutil.RunCheckingLeaks(m, 10*time.Second, testutil.LeakMarkers...))
}

// newBus returns a bus on a fresh embedded server.
func newBus(t testing.TB, cfg jetstream.Config) (*jetstream.Bus, *nats.Conn) {
	t.Helper()
	srv := natstest.RunEmbedded(t)
	nc := natstest.InProcessConn(t, srv)
	b, err := jetstream.New(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, nc
}

func pub(t testing.TB, b facade.Publisher, topic, payload, key string) *facade.EventRecord {
	t.Helper()
	e, err := b.Publish(t.Context(), topic, json.RawMessage(payload), facade.PublishOptions{Key: key})
	if err != nil {
		t.Fatalf("publish %s: %v", topic, err)
	}
	return e
}

// TestStalledPullRecovers kills the NATS server under a consuming group and
// starts it again: the pull loop must notice (heartbeats) and resume within
// seconds, not after nats.go's 30 s default.
func TestStalledPullRecovers(t *testing.T) {
	p := natstest.StartProcess(t)
	b, err := jetstream.Open(t.Context(), jetstream.OpenConfig{
		URL:         p.URL(),
		NATSOptions: []nats.Option{nats.ReconnectWait(100 * time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got := make(chan string, 10)
	unsub, err := b.Subscribe(t.Context(), "stall.t", "g", func(_ context.Context, dl facade.Delivery) error {
		e := dl.Event()
		got <- string(e.Payload)
		return nil
	}, facade.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub.Stop(context.Background())
	pub(t, b, "stall.t", `"before"`, "")
	if v := <-got; v != `"before"` {
		t.Fatal(v)
	}
	p.Stop() // killed: no goodbye to the client
	p.Start()
	start := time.Now()
	testutil.CheckFor(t, 15*time.Second, func() error {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := b.Publish(ctx, "stall.t", json.RawMessage(`"after"`), facade.PublishOptions{})
		return err
	})
	// "before" may come again: the server can die before it stores the ack,
	// and delivery is at least once.
	timeout := time.After(10 * time.Second)
	for {
		select {
		case v := <-got:
			switch v {
			case `"before"`:
				continue
			case `"after"`:
				t.Logf("delivery resumed %v after the server came back", time.Since(start).Round(time.Millisecond))
				return
			}
			t.Fatalf("got %s", v)
		case <-timeout:
			t.Fatal("pull loop did not resume within 10 s of the server's return")
		}
	}
}

func TestCompactedTopic(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{Topics: []jetstream.TopicConfig{
		{Pattern: "state.*", Compaction: true},
		{Pattern: "hb.*", RetentionDays: 3},
	}})
	for i := range 50 {
		pub(t, b, "state.proc", fmt.Sprintf(`{"v":%d}`, i), fmt.Sprintf("host:p:%d", i%5))
	}
	_, err := b.Publish(t.Context(), "state.proc", json.RawMessage(`1`), facade.PublishOptions{})
	if !errors.Is(err, facade.ErrKeyRequired) {
		t.Fatalf("unkeyed publish on compacted topic: %v", err)
	}
	name, err := b.JetStream().StreamNameBySubject(t.Context(), "state.proc")
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.JetStream().Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 5 {
		t.Fatalf("compacted stream holds %d messages, want 5 (one per key)", n)
	}
	latest, err := b.LatestByKey(t.Context(), "state.proc", []string{"host:p:0", "host:p:4"})
	if err != nil {
		t.Fatal(err)
	}
	if string(latest["host:p:0"].Payload) != `{"v":45}` || string(latest["host:p:4"].Payload) != `{"v":49}` {
		t.Fatalf("latest %s %s", latest["host:p:0"].Payload, latest["host:p:4"].Payload)
	}
	pub(t, b, "hb.x", `1`, "")
	name, _ = b.JetStream().StreamNameBySubject(t.Context(), "hb.x")
	hs, _ := b.JetStream().Stream(t.Context(), name)
	if got := hs.CachedInfo().Config.MaxAge; got != 72*time.Hour {
		t.Fatalf("retentionDays 3 gave max age %v", got)
	}
}

func TestProvision(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{Topics: []jetstream.TopicConfig{
		{Pattern: "prov.literal", Compaction: true},
		{Pattern: "prov.fam.**", Stream: "PROVFAM"}, // the ACL syntax, NATS's "prov.fam.>" in the stream
		{Pattern: "prov.old.>", Stream: "PROVOLD"},  // the NATS syntax, still accepted
		{Pattern: "prov.wild.*"},
	}})
	if err := b.Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"PROVFAM": "prov.fam.>", "PROVOLD": "prov.old.>"} {
		s, err := b.JetStream().Stream(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if subs := s.CachedInfo().Config.Subjects; len(subs) != 1 || subs[0] != want {
			t.Fatalf("stream %s captures %v, want [%s]", name, subs, want)
		}
	}
	if got := b.Config().Topics[1].Pattern; got != "prov.fam.>" {
		t.Fatalf("Config() pattern %q, want the NATS form", got)
	}
	for subject, want := range map[string]string{"prov.literal._k.x": "", "prov.fam.a.b": "PROVFAM", "prov.old.a._k.x": "PROVOLD"} {
		name, err := b.JetStream().StreamNameBySubject(t.Context(), subject)
		if err != nil || (want != "" && name != want) {
			t.Fatalf("%s: stream %q, %v", subject, name, err)
		}
	}
	if _, err := b.JetStream().StreamNameBySubject(t.Context(), "prov.wild.x"); err == nil {
		t.Fatal("a wildcard topic pattern was provisioned")
	}
	if err := b.Provision(t.Context()); err != nil {
		t.Fatalf("provisioning twice: %v", err)
	}
}

func TestFamilyStream(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "fam.>", Stream: "FAMILY"}}})
	got := make(chan *facade.EventRecord, 4)
	h := func(_ context.Context, d facade.Delivery) error { got <- d.Event(); return nil }
	for _, topic := range []string{"fam.a", "fam.a.b"} {
		unsub, err := b.Subscribe(t.Context(), topic, "same-group", h, facade.SubscribeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unsub.Stop(context.Background()) })
	}
	pub(t, b, "fam.a", `1`, "k")
	pub(t, b, "fam.a.b", `2`, "")
	seen := map[string]string{}
	for range 2 {
		e := <-got
		seen[e.Topic] = string(e.Payload)
	}
	if seen["fam.a"] != "1" || seen["fam.a.b"] != "2" {
		t.Fatalf("family topics delivered %v", seen)
	}
	for _, topic := range []string{"fam.a", "fam.a.b"} {
		if name, _ := b.JetStream().StreamNameBySubject(t.Context(), topic); name != "FAMILY" {
			t.Fatalf("%s is in stream %q", topic, name)
		}
	}
}

func TestOperatorStreamUsedAsIs(t *testing.T) {
	b, nc := newBus(t, jetstream.Config{})
	js, _ := njs.New(nc)
	if _, err := js.CreateStream(t.Context(), njs.StreamConfig{Name: "OPS", Subjects: []string{"ops.>"}, Storage: njs.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(t.Context(), njs.StreamConfig{Name: "LEGACY", Subjects: []string{"legacy.one"}}); err != nil {
		t.Fatal(err)
	}
	e := pub(t, b, "ops.a", `1`, "host:1")
	raw, err := js.Stream(t.Context(), "OPS")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := raw.GetMsg(t.Context(), e.Seq); err != nil || m.Subject != "ops.a._k.host:1" {
		t.Fatalf("operator stream holds %v, %v", m, err)
	}
	pub(t, b, "legacy.one", `2`, "")
	_, err = b.Publish(t.Context(), "legacy.one", json.RawMessage(`3`), facade.PublishOptions{Key: "k"})
	if !errors.Is(err, facade.ErrBadKey) {
		t.Fatalf("keyed publish to a stream that cannot hold keys: %v", err)
	}
	for name := range js.StreamNames(t.Context()).Name() {
		if name != "OPS" && name != "LEGACY" {
			t.Fatalf("the bus created stream %s instead of using the operator's", name)
		}
	}
}

func TestChildTopicCoexists(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{})
	pub(t, b, "process.state", `{"s":1}`, "h:n:1")
	pub(t, b, "process.state.snapshot", `{"s":2}`, "h:n:1")
	pub(t, b, "process.state", `{"s":3}`, "")
	for topic, want := range map[string]string{"process.state": `{"s":1}`, "process.state.snapshot": `{"s":2}`} {
		l, err := b.LatestByKey(t.Context(), topic, []string{"h:n:1"})
		if err != nil {
			t.Fatal(err)
		}
		if got := string(l["h:n:1"].Payload); got != want {
			t.Fatalf("%s latest %s, want %s", topic, got, want)
		}
	}
}

func TestOpenEmbeddedModes(t *testing.T) {
	for _, tc := range []struct {
		name string
		sc   jetstream.ServerConfig
	}{
		{"memory", jetstream.ServerConfig{Memory: true, Port: -1}},
		{"sync always", jetstream.ServerConfig{DataDir: t.TempDir(), Port: -1, Sync: jetstream.SyncAlways}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := jetstream.Open(t.Context(), jetstream.OpenConfig{Server: tc.sc})
			if err != nil {
				t.Fatal(err)
			}
			e := pub(t, b, "mode.t", `1`, "")
			name, _ := b.JetStream().StreamNameBySubject(t.Context(), "mode.t")
			s, _ := b.JetStream().Stream(t.Context(), name)
			wantStorage := njs.FileStorage
			if tc.sc.Memory {
				wantStorage = njs.MemoryStorage
			}
			if s.CachedInfo().Config.Storage != wantStorage || e.Seq != 1 {
				t.Fatalf("storage %v", s.CachedInfo().Config.Storage)
			}
			opts := b.Server().JetStreamConfig()
			if tc.sc.Sync == jetstream.SyncAlways && !opts.SyncAlways {
				t.Fatal("sync always not applied")
			}
			dir := b.Server().StoreDir()
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); tc.sc.Memory && !os.IsNotExist(err) {
				t.Fatalf("memory mode left %s behind", dir)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     jetstream.Config
		wantErr bool
	}{
		{"zero", jetstream.Config{}, false},
		{"bad storage", jetstream.Config{Storage: "disk"}, true},
		{"retry backoffs", jetstream.Config{RetryBackoff: time.Second, MaxRetryBackoff: time.Minute}, false},
		{"retry backoff above its maximum", jetstream.Config{RetryBackoff: time.Minute, MaxRetryBackoff: time.Second}, true},
		{"retry backoff below a millisecond", jetstream.Config{RetryBackoff: time.Microsecond}, true},
		{"retry backoff negative", jetstream.Config{MaxRetryBackoff: -time.Second}, true},
		{"retry backoff above a day", jetstream.Config{MaxRetryBackoff: 25 * time.Hour}, true},
		{"even replicas", jetstream.Config{Replicas: 2}, true},
		{"topic without pattern", jetstream.Config{Topics: []jetstream.TopicConfig{{MaxAge: time.Hour}}}, true},
		{"bad stream name", jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "a.>", Stream: "a.b"}}}, true},
		{"ok topic", jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "a.>", Stream: "A", Compaction: true}}}, false},
		{"family in the ACL syntax", jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "a.*.**", Stream: "A"}}}, false},
		{"** before the end", jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "a.**.c", Stream: "A"}}}, true},
		{"> before the end", jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "a.>.c"}}}, true},
		{"* inside a segment", jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "a.b*"}}}, true},
		{"empty segment", jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "a..b"}}}, true},
		{"delete markers", jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "a.*", DeleteMarkerTTL: time.Minute}}}, false},
		{"pull expiry and heartbeat", jetstream.Config{PullExpiry: 2 * time.Second, PullHeartbeat: time.Second}, false},
		{"pull expiry below a second", jetstream.Config{PullExpiry: 500 * time.Millisecond}, true},
		{"pull heartbeat below 500ms", jetstream.Config{PullHeartbeat: 100 * time.Millisecond}, true},
		{"pull heartbeat above half the expiry", jetstream.Config{PullExpiry: 2 * time.Second, PullHeartbeat: 1500 * time.Millisecond}, true},
		{"pull heartbeat above half the default expiry", jetstream.Config{PullHeartbeat: 3 * time.Second}, true},
		{"delete markers below a second", jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "a.*", DeleteMarkerTTL: time.Millisecond}}}, true},
	}
	for _, tc := range tests {
		if err := tc.cfg.Validate(); (err != nil) != tc.wantErr {
			t.Errorf("%s: err %v, want error %v", tc.name, err, tc.wantErr)
		}
	}
	if err := (jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "a.**.c", Stream: "A"}}}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "last segment") || !strings.Contains(err.Error(), `"a.**"`) {
		t.Fatalf("** before the end: %v, want an error naming the last-segment rule and the family a.**", err)
	}
}

// TestAfterIDLeavesNoConsumer: resolving an id must not leave server-side
// consumers behind.
func TestAfterIDLeavesNoConsumer(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{})
	var last *facade.EventRecord
	for range 20 {
		last = pub(t, b, "rid.t", `1`, "")
	}
	unsub, err := b.Subscribe(t.Context(), "rid.t", "g", func(context.Context, facade.Delivery) error { return nil },
		facade.SubscribeOptions{From: facade.FromAfterID, AfterID: last.ID})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub.Stop(context.Background())
	name, _ := b.JetStream().StreamNameBySubject(t.Context(), "rid.t")
	s, _ := b.JetStream().Stream(t.Context(), name)
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers != 1 {
		t.Fatalf("%d consumers on the stream, want only the group's", info.State.Consumers)
	}
	if err := b.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := b.Ready(t.Context()); err == nil {
		t.Fatal("a closed bus reports ready")
	}
}

// TestManualAckExpiredDeliveryFreesItsSlot: a ManualAck delivery whose ack
// deadline passed is redelivered (maybe to another member); the member that
// held it must get its slot back instead of waiting forever.
func TestManualAckExpiredDeliveryFreesItsSlot(t *testing.T) {
	srv := natstest.RunEmbedded(t)
	newMember := func() *jetstream.Bus {
		b, err := jetstream.New(natstest.InProcessConn(t, srv), jetstream.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	a, b := newMember(), newMember()
	opts := facade.SubscribeOptions{ManualAck: true, MaxInFlight: 1, GroupMaxInFlight: 10, AckTimeoutMs: 300}
	var first atomic.Bool
	aGot := make(chan string, 100)
	unsubA, err := a.Subscribe(t.Context(), "slot.t", "g", func(_ context.Context, dl facade.Delivery) error {
		e := dl.Event()
		if first.CompareAndSwap(false, true) {
			return nil // never acked
		}
		aGot <- e.ID
		err := dl.Ack(context.Background())
		return err
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer unsubA.Stop(context.Background())
	pub(t, a, "slot.t", `0`, "")
	testutil.CheckFor(t, 5*time.Second, func() error {
		if !first.Load() {
			return errors.New("member A has not received its first event")
		}
		return nil
	})
	unsubB, err := b.Subscribe(t.Context(), "slot.t", "g", func(_ context.Context, dl facade.Delivery) error {
		return dl.Ack(context.Background())
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer unsubB.Stop(context.Background())
	for range 20 {
		pub(t, a, "slot.t", `1`, "")
	}
	select {
	case <-aGot:
	case <-time.After(10 * time.Second):
		t.Fatal("member A never got another event: its expired delivery still holds its only slot")
	}
}

func TestInactiveGroupIsDeleted(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{})
	unsub, err := b.Subscribe(t.Context(), "inact.t", "page-1", func(context.Context, facade.Delivery) error { return nil },
		facade.SubscribeOptions{InactiveTimeoutMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetCursor(t.Context(), "inact.t", "page-1"); err != nil {
		t.Fatalf("group while subscribed: %v", err)
	}
	_ = unsub.Stop(t.Context())
	testutil.CheckFor(t, 15*time.Second, func() error {
		if _, err := b.GetCursor(t.Context(), "inact.t", "page-1"); !errors.Is(err, facade.ErrNotFound) {
			return fmt.Errorf("group still there: %v", err)
		}
		return nil
	})
}
