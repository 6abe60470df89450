package ops_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/ops"
)

var busConfig = jetstream.Config{Topics: []jetstream.TopicConfig{
	{Pattern: "process.state", Compaction: true},
	{Pattern: "audit.>", Stream: "AUDIT"},
}}

const orders = "orders.created"

// fixture is a topic of 10 events with two groups:
//
//	billing: 6 delivered, 1-4 acked          -> floor 4, ackPending 2, pending 4
//	audit:   3 delivered, 1 and 3 acked      -> floor 1, ackPending 1, pending 7
//
// and a compacted topic process.state with keys a, b, a.
type fixture struct {
	*env
	events []*facade.EventRecord // orders.created, events[i].Seq == i+1
	stored []time.Time           // stored times of events
	states []*facade.EventRecord
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{env: newEnv(t, busConfig, ops.Config{Durability: "test-durability"})}
	ctx := t.Context()
	for i := range 10 {
		f.events = append(f.events, publish(t, f.bus, orders, fmt.Sprintf(`{"n":%d}`, i+1), ""))
	}
	ti, err := f.bus.LookupTopic(ctx, orders)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range f.events {
		raw, err := ti.Stream.GetMsg(ctx, e.Seq)
		if err != nil {
			t.Fatal(err)
		}
		f.stored = append(f.stored, raw.Time)
	}
	f.group(t, ti, "billing", 6, 1, 2, 3, 4)
	f.group(t, ti, "audit", 3, 1, 3)
	for _, k := range []string{"a", "b", "a"} {
		f.states = append(f.states, publish(t, f.bus, "process.state", `{"k":"`+k+`"}`, k))
	}
	return f
}

// group creates group on the topic, has n events delivered to it and acks
// the given sequences.
func (f *fixture) group(t *testing.T, ti *jetstream.TopicInfo, group string, n int, ack ...uint64) {
	t.Helper()
	ctx := t.Context()
	if err := f.bus.SetCursor(ctx, ti.Topic, group, facade.CursorPosition{}); err != nil {
		t.Fatal(err)
	}
	cons, err := ti.Stream.Consumer(ctx, ti.ConsumerName(group))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(n, njs.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for msg := range batch.Messages() {
		got++
		meta, err := msg.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(ack, meta.Sequence.Stream) {
			if err := msg.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got != n {
		t.Fatalf("group %s: %d delivered, want %d (%v)", group, got, n, batch.Error())
	}
}

type cursor struct {
	Group        string `json:"group"`
	Consumer     string `json:"consumer"`
	LastID       string `json:"lastId"`
	LastTS       int64  `json:"lastTs"`
	LastSeq      uint64 `json:"lastSeq"`
	DeliveredSeq uint64 `json:"deliveredSeq"`
	Pending      uint64 `json:"pending"`
	AckPending   int    `json:"ackPending"`
	Lag          uint64 `json:"lag"`
	Redelivered  int    `json:"redelivered"`
	Waiting      int    `json:"waiting"`
	Paused       bool   `json:"paused"`
	LastActiveTS int64  `json:"lastActiveTs"`
}

func TestCursors(t *testing.T) {
	f := newFixture(t)
	var got struct {
		Topic   string   `json:"topic"`
		Stream  string   `json:"stream"`
		Cursors []cursor `json:"cursors"`
	}
	f.getJSON(t, "/cursors?topic="+orders, &got)
	if got.Topic != orders || got.Stream == "" {
		t.Fatalf("topic %q stream %q", got.Topic, got.Stream)
	}
	for i := range got.Cursors {
		if got.Cursors[i].LastActiveTS == 0 {
			t.Errorf("%s: no lastActiveTs", got.Cursors[i].Group)
		}
		got.Cursors[i].LastActiveTS = 0
	}
	want := []cursor{
		{Group: "audit", Consumer: "audit", LastID: f.events[0].ID, LastTS: f.events[0].TS, LastSeq: 1,
			DeliveredSeq: 3, Pending: 7, AckPending: 1, Lag: 8},
		{Group: "billing", Consumer: "billing", LastID: f.events[3].ID, LastTS: f.events[3].TS, LastSeq: 4,
			DeliveredSeq: 6, Pending: 4, AckPending: 2, Lag: 6},
	}
	if !slices.Equal(got.Cursors, want) {
		t.Fatalf("cursors:\n got %+v\nwant %+v", got.Cursors, want)
	}

	// A consumer made with plain NATS tools on the topic's subject is a
	// group too; an ordered consumer (no acks) is not.
	ctx := t.Context()
	if _, err := f.js.CreateConsumer(ctx, got.Stream, njs.ConsumerConfig{
		Durable: "ext", FilterSubject: orders, AckPolicy: njs.AckExplicitPolicy,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.js.CreateConsumer(ctx, got.Stream, njs.ConsumerConfig{
		Name: "tail", FilterSubject: orders, AckPolicy: njs.AckNonePolicy,
	}); err != nil {
		t.Fatal(err)
	}
	f.getJSON(t, "/cursors?topic="+orders, &got)
	var groups []string
	for _, c := range got.Cursors {
		groups = append(groups, c.Group)
	}
	if !slices.Equal(groups, []string{"audit", "billing", "ext"}) {
		t.Fatalf("groups %v, want audit billing ext", groups)
	}
	if c := got.Cursors[2]; c.Pending != 10 || c.Lag != 10 || c.LastSeq != 0 || c.LastID != "" {
		t.Fatalf("ext cursor %+v", c)
	}
	var lag lagAnswer
	f.getJSON(t, "/lag?topic="+orders+"&group=ext", &lag)
	if lag.Lag != 10 || lag.Oldest == nil || lag.Oldest.Seq != 1 {
		t.Fatalf("ext lag %+v", lag)
	}
	if status, body, _ := f.get(t, "/lag?topic="+orders+"&group=tail"); status != http.StatusNotFound {
		t.Fatalf("lag of an ordered consumer: %d %s", status, body)
	}

	// A topic without groups answers an empty list, not null.
	var none struct {
		Topic   string   `json:"topic"`
		Stream  string   `json:"stream"`
		Cursors []cursor `json:"cursors"`
	}
	f.getJSON(t, "/cursors?topic=process.state", &none)
	if none.Cursors == nil || len(none.Cursors) != 0 {
		t.Fatalf("process.state cursors: %+v", none.Cursors)
	}
}

type lagAnswer struct {
	Topic      string `json:"topic"`
	Group      string `json:"group"`
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	Lag        uint64 `json:"lag"`
	Pending    uint64 `json:"pending"`
	AckPending int    `json:"ackPending"`
	LagMs      *int64 `json:"lagMs"`
	Oldest     *struct {
		Seq      uint64 `json:"seq"`
		ID       string `json:"id"`
		TS       int64  `json:"ts"`
		StoredTS int64  `json:"storedTs"`
	} `json:"oldest"`
	Cursor        facade.CursorPosition `json:"cursor"`
	StreamLastSeq uint64                `json:"streamLastSeq"`
	StreamLastTS  int64                 `json:"streamLastTs"`
}

func TestLag(t *testing.T) {
	f := newFixture(t)
	// billing's oldest unacked event is seq 5; pretend it is 1.5 s later.
	now := f.stored[4].Add(1500 * time.Millisecond)
	f.now.Store(&now)

	var got lagAnswer
	f.getJSON(t, "/lag?topic="+orders+"&group=billing", &got)
	if got.Topic != orders || got.Group != "billing" || got.Consumer != "billing" || got.Stream == "" {
		t.Fatalf("names: %+v", got)
	}
	if got.Lag != 6 || got.Pending != 4 || got.AckPending != 2 {
		t.Fatalf("lag %d pending %d ackPending %d, want 6 4 2", got.Lag, got.Pending, got.AckPending)
	}
	if got.LagMs == nil || *got.LagMs != 1500 {
		t.Fatalf("lagMs %v, want 1500", got.LagMs)
	}
	if got.Oldest == nil || got.Oldest.Seq != 5 || got.Oldest.ID != f.events[4].ID ||
		got.Oldest.TS != f.events[4].TS || got.Oldest.StoredTS != f.stored[4].UnixMilli() {
		t.Fatalf("oldest %+v, want seq 5 id %s", got.Oldest, f.events[4].ID)
	}
	wantCursor := facade.CursorPosition{Topic: orders, LastSeq: 4, LastID: f.events[3].ID, LastTS: f.events[3].TS}
	if got.Cursor != wantCursor {
		t.Fatalf("cursor %+v, want %+v", got.Cursor, wantCursor)
	}
	if got.StreamLastSeq != 10 || got.StreamLastTS != f.stored[9].UnixMilli() {
		t.Fatalf("stream tail %d@%d, want 10@%d", got.StreamLastSeq, got.StreamLastTS, f.stored[9].UnixMilli())
	}

	// audit acked 1 and 3: its oldest unacked event is 2.
	f.getJSON(t, "/lag?topic="+orders+"&group=audit", &got)
	if got.Lag != 8 || got.Oldest == nil || got.Oldest.Seq != 2 {
		t.Fatalf("audit: lag %d oldest %+v, want 8 and seq 2", got.Lag, got.Oldest)
	}
	if want := now.Sub(f.stored[1]).Milliseconds(); got.LagMs == nil || *got.LagMs != want {
		t.Fatalf("audit lagMs %v, want %d", got.LagMs, want)
	}

	// A group that acked everything has no lag.
	ti, err := f.bus.LookupTopic(t.Context(), orders)
	if err != nil {
		t.Fatal(err)
	}
	f.group(t, ti, "done", 10, seqRange(1, 10)...)
	got = lagAnswer{}
	f.getJSON(t, "/lag?topic="+orders+"&group=done", &got)
	if got.Lag != 0 || got.LagMs == nil || *got.LagMs != 0 || got.Oldest != nil || got.Cursor.LastSeq != 10 {
		t.Fatalf("done: %+v", got)
	}
}

func TestTopics(t *testing.T) {
	f := newFixture(t)
	// A family stream with two topics and a plain NATS stream that is no
	// topic of the hub.
	publish(t, f.bus, "audit.login", `{}`, "")
	publish(t, f.bus, "audit.logout", `{}`, "")
	if _, err := f.js.CreateStream(t.Context(), njs.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}}); err != nil {
		t.Fatal(err)
	}
	type group struct {
		Group    string `json:"group"`
		Topic    string `json:"topic"`
		Consumer string `json:"consumer"`
	}
	type stream struct {
		Name        string   `json:"name"`
		Topics      []string `json:"topics"`
		Subjects    []string `json:"subjects"`
		Messages    uint64   `json:"messages"`
		Bytes       uint64   `json:"bytes"`
		FirstSeq    uint64   `json:"firstSeq"`
		FirstTS     int64    `json:"firstTs"`
		LastSeq     uint64   `json:"lastSeq"`
		LastTS      int64    `json:"lastTs"`
		MaxAgeMs    int64    `json:"maxAgeMs"`
		MaxBytes    int64    `json:"maxBytes"`
		Compaction  bool     `json:"compaction"`
		Storage     string   `json:"storage"`
		Replicas    int      `json:"replicas"`
		Consumers   int      `json:"consumers"`
		Groups      []group  `json:"groups"`
		Description string   `json:"description"`
	}
	var got struct {
		Streams []stream `json:"streams"`
	}
	f.getJSON(t, "/topics", &got)
	byTopic := map[string]stream{}
	var names []string
	for _, s := range got.Streams {
		names = append(names, s.Name)
		byTopic["name:"+s.Name] = s
		for _, tp := range s.Topics {
			byTopic[tp] = s
		}
	}
	if slices.Contains(names, "OTHER") {
		t.Fatalf("a stream without eventhub topics is listed: %v", names)
	}
	if !slices.Contains(names, "AUDIT") || len(names) != 3 {
		t.Fatalf("streams %v, want the orders, process.state and AUDIT streams", names)
	}

	o := byTopic[orders]
	if o.Messages != 10 || o.FirstSeq != 1 || o.LastSeq != 10 || o.Compaction || o.Bytes == 0 ||
		o.FirstTS != f.stored[0].UnixMilli() || o.LastTS != f.stored[9].UnixMilli() ||
		o.Storage != "file" || o.Replicas != 1 || o.MaxAgeMs != 0 || o.MaxBytes != -1 {
		t.Fatalf("orders stream: %+v", o)
	}
	if !slices.Equal(o.Subjects, []string{orders, orders + "._k.*"}) {
		t.Fatalf("orders subjects %v", o.Subjects)
	}
	wantGroups := []group{{"audit", orders, "audit"}, {"billing", orders, "billing"}}
	if !slices.Equal(o.Groups, wantGroups) || o.Consumers != 2 {
		t.Fatalf("orders groups %+v (%d consumers), want %+v", o.Groups, o.Consumers, wantGroups)
	}

	p := byTopic["process.state"]
	if !p.Compaction || p.Messages != 2 || p.FirstSeq != 2 || p.LastSeq != 3 || len(p.Groups) != 0 {
		t.Fatalf("process.state stream: %+v", p)
	}

	// A family stream lists the topics it holds events of (from the
	// server's per-subject counts), not an empty list.
	a := byTopic["name:AUDIT"]
	if a.Messages != 2 || !slices.Equal(a.Subjects, []string{"audit.>"}) || !slices.Equal(a.Topics, []string{"audit.login", "audit.logout"}) {
		t.Fatalf("AUDIT stream: %+v", a)
	}
}

func TestLatestByKey(t *testing.T) {
	f := newFixture(t)
	status, body, _ := f.get(t, "/latest-by-key?topic=process.state&key=a")
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	es := decodeNDJSON(t, body)
	if len(es) != 1 || es[0].ID != f.states[2].ID || es[0].Key != "a" || es[0].Seq != 3 || string(es[0].Payload) != `{"k":"a"}` {
		t.Fatalf("latest of a: %s", body)
	}
	status, body, _ = f.get(t, "/latest-by-key?topic=process.state&key=b")
	if es := decodeNDJSON(t, body); status != http.StatusOK || len(es) != 1 || es[0].ID != f.states[1].ID {
		t.Fatalf("latest of b: %d %s", status, body)
	}
}

func TestProbes(t *testing.T) {
	f := newEnv(t, jetstream.Config{}, ops.Config{Durability: "test-durability"})
	var health map[string]string
	f.getJSON(t, "/healthz", &health)
	if health["status"] != "ok" || len(health) != 1 {
		t.Fatalf("healthz %v", health)
	}
	var ready map[string]string
	f.getJSON(t, "/readyz", &ready)
	if ready["status"] != "ready" || ready["durability"] != "test-durability" {
		t.Fatalf("readyz %v", ready)
	}
	// A bus on a borrowed connection: closing it leaves the connection up,
	// and /readyz must still say the hub is not ready.
	if err := f.bus.Close(); err != nil {
		t.Fatal(err)
	}
	status, body, _ := f.get(t, "/readyz")
	if status != http.StatusServiceUnavailable {
		t.Fatalf("readyz after Close: %d %s", status, body)
	}
	var down struct {
		Status     string `json:"status"`
		Durability string `json:"durability"`
		Error      struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &down); err != nil || down.Status != "unavailable" || down.Error.Code != "closed" || down.Durability != "test-durability" {
		t.Fatalf("readyz after Close: %s (%v)", body, err)
	}
	if status, _, _ := f.get(t, "/healthz"); status != http.StatusOK {
		t.Fatalf("healthz after Close: %d", status)
	}
}

// TestReadyOwnedBus closes a bus that owns its embedded server: JetStream is
// gone and /readyz answers 503.
func TestReadyOwnedBus(t *testing.T) {
	bus, err := jetstream.Open(t.Context(), jetstream.OpenConfig{
		Server: jetstream.ServerConfig{DataDir: t.TempDir(), Port: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := ops.New(ops.Config{Bus: bus.Admin(), Durability: "default"})
	if err != nil {
		t.Fatal(err)
	}
	get := func() int {
		rec := newRecorder()
		h.ServeHTTP(rec, mustRequest(t, "/readyz"))
		return rec.Code
	}
	if code := get(); code != http.StatusOK {
		t.Fatalf("readyz: %d", code)
	}
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	if code := get(); code != http.StatusServiceUnavailable {
		t.Fatalf("readyz after Close: %d", code)
	}
}

func TestErrors(t *testing.T) {
	f := newFixture(t)
	unknownID := facade.NewID()
	tests := []struct {
		path       string
		wantStatus int
		wantCode   string
	}{
		{"/cursors", 400, "bad_request"},
		{"/cursors?topic=", 400, "bad_request"},
		{"/cursors?topic=bad..topic", 400, "bad_topic"},
		{"/cursors?topic=no.such", 404, "not_found"},
		{"/lag?topic=" + orders, 400, "bad_request"},
		{"/lag?group=billing", 400, "bad_request"},
		{"/lag?topic=" + orders + "&group=ghost", 404, "not_found"},
		{"/lag?topic=no.such&group=billing", 404, "not_found"},
		{"/lag?topic=" + orders + "&group=has%20space", 400, "bad_group"},
		{"/latest-by-key?topic=process.state", 400, "bad_request"},
		{"/latest-by-key?key=a", 400, "bad_request"},
		{"/latest-by-key?topic=process.state&key=zz", 404, "not_found"},
		{"/latest-by-key?topic=no.such&key=a", 404, "not_found"},
		{"/replay", 400, "bad_request"},
		{"/replay?topic=" + orders + "&from=garbage", 400, "bad_request"},
		{"/replay?topic=" + orders + "&from=seq:0", 400, "bad_request"},
		{"/replay?topic=" + orders + "&to=1700000000000", 400, "bad_request"},
		{"/replay?topic=" + orders + "&from=ts:yesterday", 400, "bad_request"},
		{"/replay?topic=" + orders + "&limit=-1", 400, "bad_request"},
		{"/replay?topic=" + orders + "&limit=ten", 400, "bad_request"},
		{"/replay?topic=no.such", 404, "not_found"},
		{"/replay?topic=" + orders + "&from=id:" + unknownID, 404, "unknown_id"},
		{"/no-such-endpoint", 404, "not_found"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			status, body, hdr := f.get(t, tc.path)
			var got struct {
				Error struct {
					Code string `json:"code"`
					Msg  string `json:"msg"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if status != tc.wantStatus || got.Error.Code != tc.wantCode || got.Error.Msg == "" {
				t.Fatalf("got %d %s, want %d %s", status, body, tc.wantStatus, tc.wantCode)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
		})
	}
}

func TestAuthorize(t *testing.T) {
	errNoToken := errors.New("no token")
	f, _ := newFakeEnv(t, ops.Config{Authorize: func(r *http.Request) error {
		switch r.Header.Get("Authorization") {
		case "Bearer good":
			return nil
		case "Bearer reader":
			return fmt.Errorf("%w: read-only token", ops.ErrForbidden)
		}
		return errNoToken
	}}, orders)
	tests := []struct {
		path, auth string
		wantStatus int
	}{
		{"/topics", "", 401},
		{"/topics", "Bearer bad", 401},
		{"/topics", "Bearer reader", 403},
		{"/topics", "Bearer good", 200},
		{"/replay?topic=" + orders, "", 401},
		{"/replay?topic=" + orders, "Bearer good", 200},
		{"/healthz", "", 200}, // probes are open unless AuthorizeProbes
		{"/readyz", "", 200},
		// A name that is not one is refused as such, before any rights check.
		{"/replay?topic=..", "Bearer reader", 400},
		{"/replay?topic=%3E", "Bearer reader", 400},
		{"/lag?topic=" + orders + "&group=a%20b", "Bearer reader", 400},
		{"/cursors?topic=", "Bearer reader", 400},
	}
	for _, tc := range tests {
		hdr := http.Header{}
		if tc.auth != "" {
			hdr.Set("Authorization", tc.auth)
		}
		status, body, rh := f.do(t, tc.path, hdr)
		if status != tc.wantStatus {
			t.Errorf("%s with %q: %d %s, want %d", tc.path, tc.auth, status, body, tc.wantStatus)
		}
		if status == 401 && rh.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", tc.path)
		}
	}

	g, _ := newFakeEnv(t, ops.Config{AuthorizeProbes: true, Authorize: func(*http.Request) error { return errNoToken }})
	if status, _, _ := g.get(t, "/healthz"); status != 401 {
		t.Fatalf("healthz with AuthorizeProbes: %d", status)
	}
}

func TestConfig(t *testing.T) {
	if _, err := ops.New(ops.Config{}); !errors.Is(err, ops.ErrNoBus) {
		t.Fatalf("New without bus: %v", err)
	}
	a := &fakeAdmin{}
	if _, err := ops.New(ops.Config{Bus: a, FlushEvery: -1}); err == nil {
		t.Fatal("negative FlushEvery accepted")
	}
	// A bus with only the status role (as a *jetstream.Bus, whose
	// operator roles are its Admin handle's) is refused.
	status := struct{ ops.Status }{a}
	if _, err := ops.New(ops.Config{Bus: status}); !errors.Is(err, ops.ErrMissingRole) || !strings.Contains(err.Error(), "Config.Topics") {
		t.Fatalf("New with a bus that is no Topics: %v", err)
	}
	// Each role may come from its own value; nil ones are Bus.
	if _, err := ops.New(ops.Config{Bus: status, Topics: a, Events: a, Groups: a, Keys: a, Export: a}); err != nil {
		t.Fatalf("New with roles set one by one: %v", err)
	}
	// Register mounts the routes on another mux.
	mux := http.NewServeMux()
	h, err := ops.New(ops.Config{Bus: a})
	if err != nil {
		t.Fatal(err)
	}
	h.Register(mux)
	rec := newRecorder()
	mux.ServeHTTP(rec, mustRequest(t, "/healthz"))
	if rec.Code != 200 {
		t.Fatalf("healthz on a caller's mux: %d", rec.Code)
	}
}

func mustRequest(t *testing.T, path string) *http.Request {
	t.Helper()
	u, err := url.Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The admin handle plays every role of the endpoints, the bus the status
// and export roles.
var (
	_ ops.Topics       = (*jetstream.Admin)(nil)
	_ ops.Events       = (*jetstream.Admin)(nil)
	_ ops.Groups       = (*jetstream.Admin)(nil)
	_ ops.Keys         = (*jetstream.Admin)(nil)
	_ ops.Status       = (*jetstream.Bus)(nil)
	_ ops.ExportSource = (*jetstream.Bus)(nil)
)
