package hub_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventhub/eventhub/acl"
	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
)

// The nats.js program (testdata/natsjs/test.js) and the packages it runs
// on, committed unpacked under testdata/natsjs/node_modules so that the
// test needs node and nothing from the npm registry; scripts/natsjs.sh
// fetches them again (for a new version: change package.json, run it,
// commit).
const natsJSDir = "testdata/natsjs"

// natsJSPlan is what test.js does, in this order: publish, read, admin,
// refuse, consume.
type natsJSPlan struct {
	Publish *natsJSPublish  `json:"publish,omitempty"`
	Read    *natsJSRef      `json:"read,omitempty"`
	Admin   *natsJSRef      `json:"admin,omitempty"`
	Refuse  []natsJSRefusal `json:"refuse,omitempty"`
	Consume *natsJSRef      `json:"consume,omitempty"`
}

type natsJSPublish struct {
	Subject string `json:"subject"`
	Count   int    `json:"count"`
}

// natsJSRef names a subject, a stream or a consumer.
type natsJSRef struct {
	Subject  string `json:"subject,omitempty"`
	Stream   string `json:"stream,omitempty"`
	Consumer string `json:"consumer,omitempty"`
}

// natsJSRefusal is a call test.js makes that must be refused with a
// permissions violation naming Want.
type natsJSRefusal struct {
	Op       string `json:"op"`
	Subject  string `json:"subject,omitempty"`
	Stream   string `json:"stream,omitempty"`
	Consumer string `json:"consumer,omitempty"`
	Want     string `json:"-"`
}

// natsJSLine is one line test.js writes.
type natsJSLine struct {
	Consuming bool           `json:"consuming"`
	Published []uint64       `json:"published"`
	Read      *natsJSRead    `json:"read"`
	Admin     *natsJSAdmin   `json:"admin"`
	Refusal   *natsJSOutcome `json:"refusal"`
	Got       *int           `json:"got"`
	Done      bool           `json:"done"`
	Error     string         `json:"error"`
}

type natsJSRead struct {
	Stream string          `json:"stream"`
	Direct json.RawMessage `json:"direct"`
	MsgGet json.RawMessage `json:"msgGet"`
}

type natsJSAdmin struct {
	Streams int    `json:"streams"`
	Created string `json:"created"`
	Deleted bool   `json:"deleted"`
}

type natsJSOutcome struct{ Op, Code, Error string }

// nodeBinary is node, or a failure that says how to install it.
func nodeBinary(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: run scripts/node.sh (Debian: apt-get install nodejs)")
	}
	checkNatsJSPackages(t)
	return node
}

// checkNatsJSPackages fails when a committed package is not the version
// package.json pins.
func checkNatsJSPackages(t *testing.T) {
	t.Helper()
	var pins struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	b, err := os.ReadFile(filepath.Join(natsJSDir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &pins); err != nil {
		t.Fatal(err)
	}
	if len(pins.Dependencies) == 0 {
		t.Fatalf("%s/package.json pins no packages", natsJSDir)
	}
	for name, want := range pins.Dependencies {
		var pkg struct{ Version string }
		b, err := os.ReadFile(filepath.Join(natsJSDir, "node_modules", name, "package.json"))
		if err == nil {
			err = json.Unmarshal(b, &pkg)
		}
		if err != nil || pkg.Version != want {
			t.Fatalf("committed %s is %q (%v), package.json pins %q: run scripts/natsjs.sh", name, pkg.Version, err, want)
		}
	}
}

// groupShare is a hub group with one WebSocket member, which records who
// got each event (the WebSocket member or nats.js) and any event delivered
// twice.
type groupShare struct {
	topic, group string
	total        int

	mu        sync.Mutex
	seen      map[int]string
	dups      []string
	nativeGot chan struct{}
	once      sync.Once
	all       chan struct{} // closed when every event was delivered
	allOnce   sync.Once
}

func (g *groupShare) record(who string, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if prev, dup := g.seen[n]; dup {
		g.dups = append(g.dups, fmt.Sprintf("event %d delivered to %s and to %s", n, prev, who))
	}
	g.seen[n] = who
	if len(g.seen) == g.total {
		g.allOnce.Do(func() { close(g.all) })
	}
}

// missing describes the events no member has had yet.
func (g *groupShare) missing() string {
	if g == nil {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []int
	for n := range g.total {
		if _, ok := g.seen[n]; !ok {
			out = append(out, n)
		}
	}
	return fmt.Sprintf("\nevents no member had: %v; delivered: %v", out, g.seen)
}

// joinGroup subscribes a WebSocket member to group on topic (creating the
// topic's stream and the group's consumer). It holds one event at a time
// and keeps its first until nats.js has had one, so both get work whoever
// pulls first.
func joinGroup(t *testing.T, h *hub.Hub, topic, group string, total int) *groupShare {
	t.Helper()
	g := &groupShare{topic: topic, group: group, total: total, seen: map[int]string{}, nativeGot: make(chan struct{}), all: make(chan struct{})}
	handler := func(ctx context.Context, dl facade.Delivery) error {
		var v struct{ N int }
		if err := json.Unmarshal(dl.Event().Payload, &v); err != nil {
			return err
		}
		select {
		case <-g.nativeGot:
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		g.record("websocket", v.N)
		return nil
	}
	sub, err := dial(t, h, staticToken).Subscribe(t.Context(), topic, group, handler, facade.SubscribeOptions{MaxInFlight: 1, GroupMaxInFlight: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Stop(context.Background()) })
	return g
}

// natsJSResult is what one run of test.js reported.
type natsJSResult struct {
	published []uint64
	read      *natsJSRead
	admin     *natsJSAdmin
	refusals  []natsJSOutcome
}

// runNatsJS runs test.js with plan against the hub's embedded server.
// With g set, each event nats.js reports acked counts as the native
// member's, and test.js's stdin is closed once g has every event.
// consuming, if set, runs once nats.js has joined the group.
func runNatsJS(t *testing.T, h *hub.Hub, token string, plan natsJSPlan, g *groupShare, consuming func()) natsJSResult {
	t.Helper()
	node := nodeBinary(t)
	planJSON, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "test.js", h.Bus.Server().ClientURL(), token, string(planJSON))
	cmd.Dir = natsJSDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done(): // the test ended early; node is killed
				return
			}
		}
	})
	var res natsJSResult
	var transcript []string
	var closeStdin sync.Once
	stopConsuming := func() { closeStdin.Do(func() { _ = stdin.Close() }) }
	if plan.Consume == nil {
		stopConsuming()
	}
	var all chan struct{} // nil: nothing to wait for
	if g != nil {
		all = g.all
	}
	done := false
	for line := range linesUntil(lines, all, stopConsuming) {
		transcript = append(transcript, line)
		var l natsJSLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Errorf("test.js wrote %q: %v", line, err)
			continue
		}
		switch {
		case l.Error != "":
			t.Errorf("nats.js: %s", l.Error)
		case l.Consuming:
			if consuming != nil {
				consuming()
			}
		case l.Published != nil:
			res.published = l.Published
		case l.Read != nil:
			res.read = l.Read
		case l.Admin != nil:
			res.admin = l.Admin
		case l.Refusal != nil:
			res.refusals = append(res.refusals, *l.Refusal)
		case l.Got != nil && g != nil:
			g.once.Do(func() { close(g.nativeGot) })
			g.record("nats.js", *l.Got)
		case l.Done:
			done = true
		}
	}
	stopConsuming()
	wg.Wait()
	if err := cmd.Wait(); err != nil || !done {
		t.Fatalf("test.js: %v (done %v)\nstdout:\n%s\nstderr:\n%s%s", err, done, strings.Join(transcript, "\n"), stderr.String(), g.missing())
	}
	if t.Failed() {
		t.FailNow()
	}
	if len(res.refusals) != len(plan.Refuse) {
		t.Fatalf("test.js tried %d of %d refusals", len(res.refusals), len(plan.Refuse))
	}
	for i, r := range plan.Refuse {
		got := res.refusals[i]
		if got.Code != "PERMISSIONS_VIOLATION" || !strings.Contains(got.Error, r.Want) {
			t.Errorf("%s %s%s: got %q %q, want a permissions violation on %s", r.Op, r.Stream, r.Subject, got.Code, got.Error, r.Want)
		}
	}
	return res
}

// linesUntil yields lines until the channel closes, and calls stop once
// when all closes (whichever member got the last event).
func linesUntil(lines <-chan string, all <-chan struct{}, stop func()) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for {
			select {
			case <-all:
				stop()
				all = nil
			case line, ok := <-lines:
				if !ok || !yield(line) {
					return
				}
			}
		}
	}
}

// checkShared checks that every event went to exactly one member, both
// members had work, and the group's cursor is past the last event.
func (g *groupShare) checkShared(t *testing.T, h *hub.Hub) {
	t.Helper()
	g.mu.Lock()
	counts := map[string]int{}
	for _, who := range g.seen {
		counts[who]++
	}
	dups := g.dups
	g.mu.Unlock()
	if len(dups) > 0 {
		t.Fatalf("delivered twice: %v", dups)
	}
	if counts["websocket"]+counts["nats.js"] != g.total || counts["websocket"] == 0 || counts["nats.js"] == 0 {
		t.Fatalf("the work was not shared: %v of %d", counts, g.total)
	}
	t.Logf("events per member: %v", counts)
	testutil.CheckFor(t, 10*time.Second, func() error {
		cur, err := h.Bus.GetCursor(t.Context(), g.topic, g.group)
		if err != nil {
			return err
		}
		if cur.LastSeq != uint64(g.total) || cur.Pending != 0 {
			return fmt.Errorf("%s/%s cursor %+v, want seq %d and nothing pending", g.topic, g.group, *cur, g.total)
		}
		return nil
	})
}

// TestNatsJSClient: with auth on, a nats.js program publishes to a topic
// with JetStream acks, reads its last event by subject, and consumes a hub
// group beside a WebSocket member of that group: the work is shared, each event
// is delivered once, and the group's cursor moves past all of them. The
// static token and the admin scope also get the rest of the JetStream API;
// a scoped token is refused another topic's stream and every operator
// call; a token restricted to one group is refused the others.
func TestNatsJSClient(t *testing.T) {
	h := jsHub(t)
	const total = 30
	publishN(t, h, "natsjs.other", 0, 1)
	other := streamOf(t, h, "natsjs.other")

	for _, tc := range []struct {
		name, topic, token string
		admin              bool
		refuse             func(own, consumer string) []natsJSRefusal
	}{
		{name: "static token", topic: "natsjs.static", token: staticToken, admin: true},
		{name: "admin scope", topic: "natsjs.admin", token: mint(t, time.Minute, "admin"), admin: true},
		{
			name: "scoped token", topic: "natsjs.scoped",
			token: mint(t, time.Minute, "publish:natsjs.scoped", "subscribe:natsjs.scoped"),
			refuse: func(own, consumer string) []natsJSRefusal {
				return []natsJSRefusal{
					{Op: "publish", Subject: "natsjs.other", Want: `Publish to "natsjs.other"`},
					{Op: "addConsumer", Stream: own, Consumer: "mine", Want: "$JS.API.CONSUMER.CREATE." + own + ".mine"},
					{Op: "deleteConsumer", Stream: own, Consumer: consumer, Want: "$JS.API.CONSUMER.DELETE." + own + "." + consumer},
					{Op: "streamInfo", Stream: other, Want: "$JS.API.STREAM.INFO." + other},
					{Op: "directGet", Stream: other, Subject: "natsjs.other", Want: "$JS.API.DIRECT.GET." + other},
					{Op: "msgGet", Stream: other, Want: "$JS.API.STREAM.MSG.GET." + other},
					{Op: "addConsumer", Stream: other, Consumer: "mine", Want: "$JS.API.CONSUMER.CREATE." + other},
					{Op: "deleteStream", Stream: own, Want: "$JS.API.STREAM.DELETE." + own},
					{Op: "purgeStream", Stream: own, Want: "$JS.API.STREAM.PURGE." + own},
					{Op: "accountInfo", Want: "$JS.API.INFO"},
					{Op: "request", Subject: "$JS.API.STREAM.LIST", Want: "$JS.API.STREAM.LIST"},
					{Op: "request", Subject: "$JS.API.>", Want: "$JS.API.>"},
					{Op: "request", Subject: "$KV.b.k", Want: "$KV.b.k"},
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := joinGroup(t, h, tc.topic, "workers", total)
			own := streamOf(t, h, tc.topic)
			consumer := jetstream.ConsumerName("workers", tc.topic, false)
			var plan natsJSPlan
			plan.Publish = &natsJSPublish{Subject: tc.topic, Count: total}
			plan.Read = &natsJSRef{Subject: tc.topic}
			if tc.admin {
				name := "NATSJS_" + strings.ToUpper(strings.ReplaceAll(tc.name, " ", "_"))
				plan.Admin = &natsJSRef{Stream: name, Subject: "adm." + name}
			}
			if tc.refuse != nil {
				plan.Refuse = tc.refuse(own, consumer)
			}
			plan.Consume = &natsJSRef{Stream: own, Consumer: consumer}

			res := runNatsJS(t, h, tc.token, plan, g, nil)
			if len(res.published) != total || res.published[0] != 1 || res.published[total-1] != total {
				t.Fatalf("js.publish acks: %v", res.published)
			}
			last := fmt.Sprintf(`{"n":%d}`, total-1)
			if r := res.read; r == nil || r.Stream != own || string(r.Direct) != last || string(r.MsgGet) != last {
				t.Fatalf("read by subject: %+v, want stream %s and %s", r, own, last)
			}
			if tc.admin && (res.admin == nil || !res.admin.Deleted || res.admin.Streams == 0) {
				t.Fatalf("admin calls: %+v", res.admin)
			}
			g.checkShared(t, h)
		})
	}

	// A token for group workers of its topic: it joins that group and no
	// other, and reads nothing directly.
	t.Run("group-restricted token", func(t *testing.T) {
		const topic = "natsjs.restricted"
		g := joinGroup(t, h, topic, "workers", total)
		unsub, err := h.Bus.Subscribe(t.Context(), topic, "others", func(context.Context, facade.Delivery) error { return nil }, facade.SubscribeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := unsub.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		own := streamOf(t, h, topic)
		otherGroup := jetstream.ConsumerName("others", topic, false)
		pol := acl.Policy{Rules: []acl.Rule{{Effect: acl.EffectAllow, Action: acl.ActionSubscribe, Topics: []string{topic}, Groups: []string{"workers"}}}}
		tok, err := auth.MintHS256(secret, auth.MintClaims{Subject: "worker", Policy: &pol, TTL: time.Minute}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		plan := natsJSPlan{
			Refuse: []natsJSRefusal{
				{Op: "bindConsumer", Stream: own, Consumer: otherGroup, Want: "$JS.API.CONSUMER.INFO." + own + "." + otherGroup},
				{Op: "deleteConsumer", Stream: own, Consumer: otherGroup, Want: "$JS.API.CONSUMER.DELETE." + own + "." + otherGroup},
				{Op: "addConsumer", Stream: own, Consumer: "mine", Want: "$JS.API.CONSUMER.CREATE." + own + ".mine"},
				{Op: "deleteConsumer", Stream: own, Consumer: jetstream.ConsumerName("workers", topic, false), Want: "$JS.API.CONSUMER.DELETE." + own + "." + jetstream.ConsumerName("workers", topic, false)},
				{Op: "directGet", Stream: own, Subject: topic, Want: "$JS.API.DIRECT.GET." + own},
				{Op: "publish", Subject: topic, Want: `Publish to "` + topic + `"`},
			},
		}
		plan.Consume = &natsJSRef{Stream: own, Consumer: jetstream.ConsumerName("workers", topic, false)}
		runNatsJS(t, h, tok, plan, g, func() { publishN(t, h, topic, 0, total) })
		g.checkShared(t, h)
	})
}
