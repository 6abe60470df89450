package ops_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/inspect"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/ops"
)

// call makes an admin request and decodes a JSON answer into v (when not
// nil); it returns the status.
func (e *env) call(t testing.TB, method, path string, v any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q", method, path, ct)
	}
	if v != nil && resp.StatusCode < 300 {
		if err := json.NewDecoder(bytes.NewReader(body)).Decode(v); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, body, err)
		}
	}
	if resp.StatusCode >= 300 && v != nil {
		t.Logf("%s %s: %d %s", method, path, resp.StatusCode, body)
	}
	return resp.StatusCode
}

// mustCall is call that wants status 2xx.
func (e *env) mustCall(t testing.TB, method, path string, v any) {
	t.Helper()
	if status := e.call(t, method, path, v); status >= 300 {
		t.Fatalf("%s %s: status %d", method, path, status)
	}
}

type adminGroup struct {
	Topic        string `json:"topic"`
	Group        string `json:"group"`
	Lag          uint64 `json:"lag"`
	LastSeq      uint64 `json:"lastSeq"`
	InFlight     int    `json:"inFlight"`
	Paused       bool   `json:"paused"`
	PauseUntilMs int64  `json:"pauseUntilMs"`
	DeadLettered int    `json:"deadLettered"`

	Retry        facade.RetryPolicy `json:"retry"`
	RetryDefault bool               `json:"retryDefault"`
	OrderBy      string             `json:"orderBy"`
}

func (e *env) groupState(t testing.TB, topic, group string) adminGroup {
	t.Helper()
	var out struct{ Groups []adminGroup }
	e.mustCall(t, "GET", "/admin/groups?topic="+topic, &out)
	for _, g := range out.Groups {
		if g.Group == group {
			return g
		}
	}
	t.Fatalf("no group %s of %s in %+v", group, topic, out.Groups)
	return adminGroup{}
}

func TestAdminGroups(t *testing.T) {
	e := newEnv(t, jetstream.Config{}, ops.Config{})
	ctx := t.Context()
	var evs []*facade.EventRecord
	for i := range 5 {
		evs = append(evs, publish(t, e.bus, "adm.g", fmt.Sprintf(`{"n":%d}`, i), ""))
	}
	if err := e.bus.SetCursor(ctx, "adm.g", "g1", facade.CursorPosition{}); err != nil {
		t.Fatal(err)
	}
	if g := e.groupState(t, "adm.g", "g1"); g.Lag != 5 || g.InFlight != 0 || g.DeadLettered != 0 || g.Paused {
		t.Errorf("group before seeking: %+v", g)
	}
	if g := e.groupState(t, "adm.g", "g1"); !g.RetryDefault || !g.Retry.Equal(facade.RetryPolicy{MinBackoffMs: 100, MaxBackoffMs: 10_000}) {
		t.Errorf("retry of a group that set none: %+v, want the default", g)
	}
	// A group created with a retry policy shows it.
	sub, err := e.bus.Subscribe(ctx, "adm.g", "g2", func(context.Context, facade.Delivery) error { return nil },
		facade.SubscribeOptions{Retry: &facade.RetryPolicy{BackoffMs: []int64{1000, 60_000}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if g := e.groupState(t, "adm.g", "g2"); g.RetryDefault || !g.Retry.Equal(facade.RetryPolicy{BackoffMs: []int64{1000, 60_000}}) || g.OrderBy != "" {
		t.Errorf("retry of a group created with a list: %+v", g)
	}
	// A group ordered by key says so.
	sub, err = e.bus.Subscribe(ctx, "adm.g", "g3", func(context.Context, facade.Delivery) error { return nil },
		facade.SubscribeOptions{OrderBy: facade.OrderByKey})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if g := e.groupState(t, "adm.g", "g3"); g.OrderBy != facade.OrderByKey {
		t.Errorf("order of a group ordered by key: %+v", g)
	}
	var all struct{ Groups []adminGroup }
	e.mustCall(t, "GET", "/admin/groups", &all)
	if !slices.ContainsFunc(all.Groups, func(g adminGroup) bool { return g.Topic == "adm.g" && g.Group == "g1" }) {
		t.Errorf("GET /admin/groups misses adm.g/g1: %+v", all.Groups)
	}

	for _, tc := range []struct {
		to      string
		wantLag uint64
	}{
		{"latest", 0}, {"seq:3", 3}, {"earliest", 5}, {"id:" + evs[3].ID, 2}, {"latest", 0},
		{fmt.Sprintf("ts:%d", time.Now().Add(-time.Hour).UnixMilli()), 5},
	} {
		var out struct {
			Next  uint64
			Group adminGroup
		}
		e.mustCall(t, "POST", "/admin/groups/seek?topic=adm.g&group=g1&to="+tc.to, &out)
		if out.Group.Lag != tc.wantLag || e.groupState(t, "adm.g", "g1").Lag != tc.wantLag {
			t.Errorf("seek to %s: lag %d, want %d", tc.to, out.Group.Lag, tc.wantLag)
		}
	}
	if s := e.call(t, "POST", "/admin/groups/seek?topic=adm.g&group=nope&to=latest", nil); s != http.StatusNotFound {
		t.Errorf("seek of an unknown group: %d, want 404", s)
	}
	if s := e.call(t, "POST", "/admin/groups/seek?topic=adm.g&group=g1&to=sideways", nil); s != http.StatusBadRequest {
		t.Errorf("seek to a bad position: %d, want 400", s)
	}

	// Pause: a member gets nothing until the group is resumed.
	e.mustCall(t, "POST", "/admin/groups/seek?topic=adm.g&group=g1&to=earliest", nil)
	var paused struct {
		PauseUntilMs int64
		Group        adminGroup
	}
	e.mustCall(t, "POST", "/admin/groups/pause?topic=adm.g&group=g1&for=1h", &paused)
	if !paused.Group.Paused || paused.PauseUntilMs < time.Now().Add(50*time.Minute).UnixMilli() {
		t.Errorf("after pause: %+v", paused)
	}
	got := make(chan string, 10)
	sub, err = e.bus.Subscribe(ctx, "adm.g", "g1", func(_ context.Context, d facade.Delivery) error {
		got <- d.Event().ID
		return nil
	}, facade.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Stop(context.Background()) })
	// A pull the paused consumer holds shows as waiting; nothing is delivered.
	testutil.CheckFor(t, 10*time.Second, func() error {
		ti, _ := e.bus.LookupTopic(ctx, "adm.g")
		c, err := ti.Stream.Consumer(ctx, ti.ConsumerName("g1"))
		if err != nil {
			return err
		}
		if ci := c.CachedInfo(); ci.NumWaiting == 0 {
			return errors.New("the member has not pulled yet")
		}
		return nil
	})
	if len(got) != 0 || e.groupState(t, "adm.g", "g1").Lag != 5 {
		t.Fatalf("a paused group delivered")
	}
	var resumed struct{ Group adminGroup }
	e.mustCall(t, "POST", "/admin/groups/resume?topic=adm.g&group=g1", &resumed)
	if resumed.Group.Paused {
		t.Errorf("after resume: %+v", resumed.Group)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		if g := e.groupState(t, "adm.g", "g1"); g.Lag != 0 {
			return fmt.Errorf("lag %d after resume", g.Lag)
		}
		return nil
	})
	if err := sub.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	var del struct{ Deleted bool }
	e.mustCall(t, "DELETE", "/admin/groups?topic=adm.g&group=g1", &del)
	if !del.Deleted {
		t.Error("delete did not say deleted")
	}
	if s := e.call(t, "GET", "/lag?topic=adm.g&group=g1", nil); s != http.StatusNotFound {
		t.Errorf("lag of the deleted group: %d, want 404", s)
	}
	if s := e.call(t, "DELETE", "/admin/groups?topic=adm.g&group=g1", nil); s != http.StatusNotFound {
		t.Errorf("second delete: %d, want 404", s)
	}
	if r, err := e.logs.find("admin call"); err != nil || !strings.Contains(fmt.Sprint(r), "anonymous") {
		t.Errorf("no audit record with the principal: %v %v", r, err)
	}
}

type adminTopic struct {
	Topic  string
	Stream struct {
		Name       string
		Messages   uint64
		MaxAgeMs   int64
		Compaction bool
	}
	Keyed, Compacted, Shared bool
	DeadLetters              uint64
}

func TestAdminTopics(t *testing.T) {
	e := newEnv(t, jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "fam.>", Stream: "FAMILY"}}}, ops.Config{})
	var decl struct {
		Created bool
		Stream  string
		Topic   adminTopic
	}
	if s := e.call(t, "POST", "/admin/topics?topic=adm.c&compaction=true&maxAge=1h", &decl); s != http.StatusCreated {
		t.Fatalf("declare: %d", s)
	}
	if !decl.Created || !decl.Topic.Compacted || decl.Topic.Stream.MaxAgeMs != 3_600_000 || !decl.Topic.Keyed {
		t.Errorf("declared: %+v", decl)
	}
	// Declaring again changes only what it names.
	if s := e.call(t, "POST", "/admin/topics?topic=adm.c&maxAge=2h", &decl); s != http.StatusOK {
		t.Fatalf("declare again: %d", s)
	}
	if decl.Created || !decl.Topic.Compacted || decl.Topic.Stream.MaxAgeMs != 7_200_000 {
		t.Errorf("declared again: %+v", decl)
	}
	if s := e.call(t, "POST", "/admin/topics?topic=adm.c&maxAge=forever", nil); s != http.StatusBadRequest {
		t.Errorf("bad maxAge: %d, want 400", s)
	}
	// A compacted topic needs keys; purge by key drops one key.
	for _, k := range []string{"k1", "k2", "k3"} {
		publish(t, e.bus, "adm.c", `{}`, k)
	}
	var purged struct{ Purged uint64 }
	e.mustCall(t, "POST", "/admin/topics/purge?topic=adm.c&key=k2", &purged)
	if purged.Purged != 1 {
		t.Errorf("purge by key: %d purged, want 1", purged.Purged)
	}
	if got, _ := e.bus.LatestByKey(t.Context(), "adm.c", []string{"k1", "k2"}); got["k1"] == nil || got["k2"] != nil {
		t.Errorf("after purging k2: %v", got)
	}
	// Purge up to a position, then all.
	for i := range 4 {
		publish(t, e.bus, "adm.p", fmt.Sprintf(`{"n":%d}`, i), "")
	}
	e.mustCall(t, "POST", "/admin/topics/purge?topic=adm.p&upTo=seq:2", &purged)
	if purged.Purged != 2 {
		t.Errorf("purge up to 2: %d", purged.Purged)
	}
	var desc adminTopic
	e.mustCall(t, "GET", "/admin/topics?topic=adm.p", &desc)
	if desc.Stream.Messages != 2 || desc.Shared || desc.Compacted {
		t.Errorf("after purge up to 2: %+v", desc)
	}
	e.mustCall(t, "POST", "/admin/topics/purge?topic=adm.p", &purged)
	if purged.Purged != 2 {
		t.Errorf("purge all: %d", purged.Purged)
	}
	// A family topic: purge takes only its own events; declare and delete refuse.
	publish(t, e.bus, "fam.a", `{}`, "")
	publish(t, e.bus, "fam.b", `{}`, "")
	e.mustCall(t, "POST", "/admin/topics/purge?topic=fam.a", &purged)
	if purged.Purged != 1 {
		t.Errorf("purge of a family topic: %d", purged.Purged)
	}
	e.mustCall(t, "GET", "/admin/topics?topic=fam.b", &desc)
	if !desc.Shared || desc.Stream.Messages != 1 {
		t.Errorf("family topic after purging its sibling: %+v", desc)
	}
	for _, c := range []struct{ method, path string }{{"DELETE", "/admin/topics?topic=fam.b"}, {"POST", "/admin/topics?topic=fam.b&maxAge=1h"}} {
		if s := e.call(t, c.method, c.path, nil); s != http.StatusConflict {
			t.Errorf("%s %s: %d, want 409", c.method, c.path, s)
		}
	}
	// Delete, then it is gone; publishing creates it again.
	e.mustCall(t, "DELETE", "/admin/topics?topic=adm.p", nil)
	if s := e.call(t, "GET", "/admin/topics?topic=adm.p", nil); s != http.StatusNotFound {
		t.Errorf("describe after delete: %d, want 404", s)
	}
	publish(t, e.bus, "adm.p", `{"again":true}`, "")
	e.mustCall(t, "GET", "/admin/topics?topic=adm.p", &desc)
	if desc.Stream.Messages != 1 {
		t.Errorf("recreated: %+v", desc)
	}
}

type deadLetter struct {
	Seq      uint64
	ID       string
	Topic    string
	Group    string
	EventID  string
	EventSeq uint64
	Attempts int
	Reason   string
}

// deadLetters makes n dead letters on topic: a group whose handler fails
// every event, with one attempt.
func deadLetters(t *testing.T, e *env, topic string, n int) []*facade.EventRecord {
	t.Helper()
	var evs []*facade.EventRecord
	for i := range n {
		evs = append(evs, publish(t, e.bus, topic, fmt.Sprintf(`{"n":%d}`, i), ""))
	}
	sub, err := e.bus.Subscribe(t.Context(), topic, "failing", func(context.Context, facade.Delivery) error {
		return errors.New("cannot handle this")
	}, facade.SubscribeOptions{From: facade.FromEarliest, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 20*time.Second, func() error {
		var out struct{ DeadLetters []deadLetter }
		e.mustCall(t, "GET", "/admin/deadletters?topic="+topic, &out)
		if len(out.DeadLetters) != n {
			return fmt.Errorf("%d dead letters", len(out.DeadLetters))
		}
		return nil
	})
	if err := sub.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestAdminDeleteKey: DELETE /admin/keys stores a tombstone for the key,
// after which /latest-by-key answers 404 for it and not for the others;
// purge=true removes its earlier events, expectedLastSeq makes it a
// compare-and-delete (409 wrong_last_seq), bad arguments get 400.
func TestAdminDeleteKey(t *testing.T) {
	e := newEnv(t, jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "adm.kc", Compaction: true}}}, ops.Config{})
	for _, topic := range []string{"adm.kc", "adm.kh"} { // compacted, full history
		publish(t, e.bus, topic, `{"v":1}`, "k1")
		last := publish(t, e.bus, topic, `{"v":2}`, "k1")
		publish(t, e.bus, topic, `{"v":1}`, "k2")
		if s := e.call(t, "DELETE", fmt.Sprintf("/admin/keys?topic=%s&key=k1&expectedLastSeq=%d", topic, last.Seq-1), nil); s != http.StatusConflict {
			t.Fatalf("%s: compare-and-delete at a stale position: %d, want 409", topic, s)
		}
		var del struct {
			ID     string
			Seq    uint64
			Purged bool
		}
		e.mustCall(t, "DELETE", fmt.Sprintf("/admin/keys?topic=%s&key=k1&purge=true&expectedLastSeq=%d", topic, last.Seq), &del)
		if del.ID == "" || del.Seq != last.Seq+2 || !del.Purged {
			t.Fatalf("%s: delete answered %+v", topic, del)
		}
		if s := e.call(t, "GET", "/latest-by-key?topic="+topic+"&key=k1", nil); s != http.StatusNotFound {
			t.Errorf("%s: latest-by-key of a deleted key: %d, want 404", topic, s)
		}
		if s := e.call(t, "GET", "/latest-by-key?topic="+topic+"&key=k2", nil); s != http.StatusOK {
			t.Errorf("%s: latest-by-key of another key: %d, want 200", topic, s)
		}
		st, err := e.bus.StreamState(t.Context(), topic)
		if err != nil {
			t.Fatal(err)
		}
		if st.Messages != 2 {
			t.Errorf("%s: after delete with purge the stream holds %d messages, want k2 and the tombstone", topic, st.Messages)
		}
	}
	for path, want := range map[string]int{
		"/admin/keys?topic=adm.kh":                          http.StatusBadRequest,
		"/admin/keys?topic=adm.kh&key=k2&purge=maybe":       http.StatusBadRequest,
		"/admin/keys?topic=adm.kh&key=k2&expectedLastSeq=x": http.StatusBadRequest,
		"/admin/keys?topic=adm.none&key=k2":                 http.StatusNotFound,
	} {
		if s := e.call(t, "DELETE", path, nil); s != want {
			t.Errorf("DELETE %s: %d, want %d", path, s, want)
		}
	}
}

func TestAdminDeadLetters(t *testing.T) {
	e := newEnv(t, jetstream.Config{}, ops.Config{})
	evs := deadLetters(t, e, "adm.d", 5)
	var list struct {
		DeadLetterTopic string
		DeadLetters     []deadLetter
		Next            uint64
		End             bool
	}
	e.mustCall(t, "GET", "/admin/deadletters?topic=adm.d&limit=2", &list)
	if len(list.DeadLetters) != 2 || list.End || list.DeadLetterTopic != "adm.d.dlq" {
		t.Fatalf("first page: %+v", list)
	}
	d := list.DeadLetters[0]
	var orig *facade.EventRecord // the handler ran concurrently: any order
	for _, ev := range evs {
		if ev.ID == d.EventID {
			orig = ev
		}
	}
	if d.Topic != "adm.d" || d.Group != "failing" || d.Attempts != 1 || !strings.Contains(d.Reason, "cannot handle this") ||
		orig == nil || d.EventSeq != orig.Seq {
		t.Fatalf("dead letter: %+v", d)
	}
	first := slices.Clone(list.DeadLetters)
	e.mustCall(t, "GET", fmt.Sprintf("/admin/deadletters?topic=adm.d&after=%d&limit=10", list.Next), &list)
	if len(list.DeadLetters) != 3 || !list.End {
		t.Fatalf("second page: %+v", list)
	}
	var groups struct{ Groups []adminGroup }
	e.mustCall(t, "GET", "/admin/groups?topic=adm.d", &groups)
	if len(groups.Groups) != 1 || groups.Groups[0].DeadLettered != 5 {
		t.Errorf("groups: %+v", groups)
	}

	count := func() uint64 {
		var desc adminTopic
		e.mustCall(t, "GET", "/admin/topics?topic=adm.d", &desc)
		return desc.Stream.Messages
	}
	// Redrive one, keeping it: twice is one event.
	type redrive struct {
		Redriven int
		Events   []struct {
			ID  string
			Seq uint64
		}
	}
	var r1, r2 redrive
	e.mustCall(t, "POST", fmt.Sprintf("/admin/deadletters/redrive?topic=adm.d&seq=%d&keep=true", d.Seq), &r1)
	e.mustCall(t, "POST", fmt.Sprintf("/admin/deadletters/redrive?topic=adm.d&seq=%d&keep=true", d.Seq), &r2)
	if r1.Redriven != 1 || len(r1.Events) != 1 || !isV7(r1.Events[0].ID) || r2.Events[0].ID != r1.Events[0].ID {
		t.Errorf("redrives: %+v %+v", r1, r2)
	}
	if n := count(); n != 6 {
		t.Errorf("adm.d holds %d events after redriving one dead letter twice, want 6", n)
	}
	// The redriven event is the original: payload, caused_by, no dlq_ headers.
	var ev struct {
		Event   facade.EventRecord
		Headers map[string][]string
	}
	e.mustCall(t, "GET", fmt.Sprintf("/admin/events?topic=adm.d&seq=%d", r1.Events[0].Seq), &ev)
	if string(ev.Event.Payload) != string(orig.Payload) || !slices.Equal(ev.Event.CausedBy, []string{orig.ID}) || ev.Event.Headers["redriven_from"] != d.ID {
		t.Errorf("redriven event: %+v", ev.Event)
	}
	for k := range ev.Event.Headers {
		if strings.HasPrefix(k, "dlq_") {
			t.Errorf("redriven event keeps header %s", k)
		}
	}
	// Redrive (moving) a range, discard one, redrive the rest.
	var rr redrive
	e.mustCall(t, "POST", fmt.Sprintf("/admin/deadletters/redrive?topic=adm.d&from=%d&to=%d", first[0].Seq, first[1].Seq), &rr)
	if rr.Redriven != 2 || count() != 7 { // the first was redriven already: one new event
		t.Errorf("range redrive: %+v, %d events", rr, count())
	}
	var disc struct{ Discarded int }
	e.mustCall(t, "POST", fmt.Sprintf("/admin/deadletters/discard?topic=adm.d&seq=%d", list.DeadLetters[0].Seq), &disc)
	if disc.Discarded != 1 {
		t.Errorf("discard: %+v", disc)
	}
	if s := e.call(t, "POST", fmt.Sprintf("/admin/deadletters/discard?topic=adm.d&seq=%d", list.DeadLetters[0].Seq), nil); s != http.StatusNotFound {
		t.Errorf("discard again: %d, want 404", s)
	}
	e.mustCall(t, "POST", "/admin/deadletters/redrive?topic=adm.d&all=true", &rr)
	if rr.Redriven != 2 || count() != 9 {
		t.Errorf("redrive all: %+v, %d events", rr, count())
	}
	e.mustCall(t, "GET", "/admin/deadletters?topic=adm.d", &list)
	if len(list.DeadLetters) != 0 || !list.End {
		t.Errorf("dead letters left: %+v", list)
	}
	if s := e.call(t, "POST", "/admin/deadletters/redrive?topic=adm.d", nil); s != http.StatusBadRequest {
		t.Errorf("redrive without a selection: %d, want 400", s)
	}
}

// TestAdminGroupActionsCountDeadLetters: seek, pause and resume answer the
// group as the group list shows it, with its dead letters counted.
func TestAdminGroupActionsCountDeadLetters(t *testing.T) {
	e := newEnv(t, jetstream.Config{}, ops.Config{})
	deadLetters(t, e, "adm.dc", 3)
	if g := e.groupState(t, "adm.dc", "failing"); g.DeadLettered != 3 {
		t.Fatalf("the group list: %+v, want 3 dead-lettered", g)
	}
	for _, action := range []string{"seek?to=earliest&", "pause?for=1m&", "resume?"} {
		var out struct{ Group adminGroup }
		e.mustCall(t, "POST", "/admin/groups/"+action+"topic=adm.dc&group=failing", &out)
		if out.Group.Group != "failing" || out.Group.DeadLettered != 3 {
			t.Errorf("%s: %+v, want 3 dead-lettered", action, out.Group)
		}
	}
}

// TestGroupOverAPattern: a group over a topic family ("afam.*") is listed
// with the others, its dead letters counted, and is read through /cursors
// and /lag, sought, paused, resumed and deleted by its pattern. A pattern
// where a topic is required is still refused.
func TestGroupOverAPattern(t *testing.T) {
	e := newEnv(t, jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "afam.**", Stream: "AFAM"}}}, ops.Config{})
	ctx := t.Context()
	for _, topic := range []string{"afam.a", "afam.b"} {
		publish(t, e.bus, topic, `{}`, "")
	}
	// A fan-in group whose handler fails every event: one dead letter of
	// each topic.
	sub, err := e.bus.Subscribe(ctx, "afam.*", "fan", func(context.Context, facade.Delivery) error {
		return errors.New("cannot handle this")
	}, facade.SubscribeOptions{From: facade.FromEarliest, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 20*time.Second, func() error {
		if g := e.groupState(t, "afam.*", "fan"); g.DeadLettered != 2 || g.Lag != 0 {
			return fmt.Errorf("the group: %+v, want 2 dead-lettered", g)
		}
		return nil
	})
	if err := sub.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.bus.SetCursor(ctx, "afam.a", "one", facade.CursorPosition{}); err != nil {
		t.Fatal(err)
	}
	var all struct{ Groups []adminGroup }
	e.mustCall(t, "GET", "/admin/groups", &all)
	for _, want := range [][2]string{{"afam.*", "fan"}, {"afam.a", "one"}} {
		if !slices.ContainsFunc(all.Groups, func(g adminGroup) bool { return g.Topic == want[0] && g.Group == want[1] }) {
			t.Errorf("GET /admin/groups misses %s/%s: %+v", want[0], want[1], all.Groups)
		}
	}
	var cursors struct {
		Topic   string
		Cursors []struct{ Group string }
	}
	e.mustCall(t, "GET", "/cursors?topic=afam.*", &cursors)
	if cursors.Topic != "afam.*" || len(cursors.Cursors) != 1 || cursors.Cursors[0].Group != "fan" {
		t.Errorf("/cursors of afam.*: %+v", cursors)
	}
	var lag struct {
		Group string
		Lag   uint64
	}
	e.mustCall(t, "GET", "/lag?topic=afam.*&group=fan", &lag)
	if lag.Group != "fan" || lag.Lag != 0 {
		t.Errorf("/lag of afam.*/fan: %+v", lag)
	}
	var out struct{ Group adminGroup }
	e.mustCall(t, "POST", "/admin/groups/seek?topic=afam.*&group=fan&to=earliest", &out)
	if out.Group.Lag != 2 || out.Group.DeadLettered != 2 {
		t.Errorf("seek to earliest: %+v", out.Group)
	}
	e.mustCall(t, "POST", "/admin/groups/seek?topic=afam.*&group=fan&to=latest", &out)
	if out.Group.Lag != 0 {
		t.Errorf("seek to latest: %+v", out.Group)
	}
	e.mustCall(t, "POST", "/admin/groups/pause?topic=afam.*&group=fan", &out)
	if !out.Group.Paused {
		t.Errorf("pause: %+v", out.Group)
	}
	out = struct{ Group adminGroup }{} // paused is left out when false
	e.mustCall(t, "POST", "/admin/groups/resume?topic=afam.*&group=fan", &out)
	if out.Group.Paused {
		t.Errorf("resume: %+v", out.Group)
	}
	e.mustCall(t, "DELETE", "/admin/groups?topic=afam.*&group=fan", nil)
	if s := e.call(t, "GET", "/lag?topic=afam.*&group=fan", nil); s != http.StatusNotFound {
		t.Errorf("/lag of the deleted group: %d, want 404", s)
	}
	// A topic's own calls still want a topic.
	for _, path := range []string{"/admin/topics?topic=afam.*", "/admin/events/browse?topic=afam.*"} {
		if s := e.call(t, "GET", path, nil); s != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", path, s)
		}
	}
	if s := e.call(t, "GET", "/admin/groups?topic=afam.**.x", nil); s != http.StatusBadRequest {
		t.Errorf("a malformed pattern: %d, want 400", s)
	}
}

func TestAdminEvents(t *testing.T) {
	e := newEnv(t, jetstream.Config{}, ops.Config{})
	var evs []*facade.EventRecord
	for i := range 6 {
		opts := facade.PublishOptions{Key: fmt.Sprintf("k%d", i%2), Headers: map[string]string{"h": "v"}}
		if i%3 == 0 {
			opts.Tags = []string{"red"}
		}
		rec, err := e.bus.Publish(t.Context(), "adm.e", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), opts)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, rec)
	}
	type stored struct {
		Event   facade.EventRecord
		Subject string
		Headers map[string][]string
	}
	var one stored
	e.mustCall(t, "GET", fmt.Sprintf("/admin/events?topic=adm.e&seq=%d", evs[2].Seq), &one)
	if one.Event.ID != evs[2].ID || one.Event.Headers["h"] != "v" || len(one.Headers) == 0 || !strings.Contains(one.Subject, "_k.") {
		t.Errorf("by seq: %+v", one)
	}
	e.mustCall(t, "GET", "/admin/events?topic=adm.e&id="+evs[4].ID, &one)
	if one.Event.Seq != evs[4].Seq {
		t.Errorf("by id: %+v", one)
	}
	if s := e.call(t, "GET", "/admin/events?topic=adm.e&seq=99", nil); s != http.StatusNotFound {
		t.Errorf("missing seq: %d", s)
	}
	if s := e.call(t, "GET", "/admin/events?topic=adm.e", nil); s != http.StatusBadRequest {
		t.Errorf("neither seq nor id: %d", s)
	}
	type page struct {
		Events []stored
		Next   uint64
		End    bool
	}
	ids := func(p page) (out []string) {
		for _, s := range p.Events {
			out = append(out, s.Event.ID)
		}
		return out
	}
	var p page
	e.mustCall(t, "GET", "/admin/events/browse?topic=adm.e&limit=4", &p)
	if !slices.Equal(ids(p), []string{evs[0].ID, evs[1].ID, evs[2].ID, evs[3].ID}) || p.End {
		t.Errorf("first page: %v %+v", ids(p), p.End)
	}
	e.mustCall(t, "GET", fmt.Sprintf("/admin/events/browse?topic=adm.e&limit=4&from=seq:%d", p.Next), &p)
	if !slices.Equal(ids(p), []string{evs[4].ID, evs[5].ID}) || !p.End {
		t.Errorf("second page: %v %v", ids(p), p.End)
	}
	e.mustCall(t, "GET", "/admin/events/browse?topic=adm.e&key=k1", &p)
	if !slices.Equal(ids(p), []string{evs[1].ID, evs[3].ID, evs[5].ID}) {
		t.Errorf("key k1: %v", ids(p))
	}
	e.mustCall(t, "GET", "/admin/events/browse?topic=adm.e&tag=red", &p)
	if !slices.Equal(ids(p), []string{evs[0].ID, evs[3].ID}) {
		t.Errorf("tag red: %v", ids(p))
	}
	e.mustCall(t, "GET", fmt.Sprintf("/admin/events/browse?topic=adm.e&from=seq:2&to=seq:3"), &p)
	if !slices.Equal(ids(p), []string{evs[1].ID, evs[2].ID}) || !p.End {
		t.Errorf("range 2..3: %v", ids(p))
	}
	e.mustCall(t, "GET", fmt.Sprintf("/admin/events/browse?topic=adm.e&from=ts:%d", time.Now().Add(time.Hour).UnixMilli()), &p)
	if len(p.Events) != 0 || !p.End {
		t.Errorf("from the future: %v", ids(p))
	}
}

// sessions is a session directory for the handler alone; the gateway's own
// is tested in package gateway and in the console's browser test.
type sessions struct{ list []inspect.SessionInfo }

func (s *sessions) Sessions() []inspect.SessionInfo { return s.list }
func (s *sessions) Disconnect(id uint64) bool {
	i := slices.IndexFunc(s.list, func(si inspect.SessionInfo) bool { return si.ID == id })
	if i < 0 {
		return false
	}
	s.list = slices.Delete(s.list, i, i+1)
	return true
}

func TestAdminSessions(t *testing.T) {
	dir := &sessions{list: []inspect.SessionInfo{{ID: 7, Principal: "svc", Subscriptions: []inspect.SubscriptionStats{{Topic: "a", Group: "g", InFlight: 2}}, InFlight: 2}}}
	e, _ := newFakeEnv(t, ops.Config{Sessions: dir})
	var out struct {
		Gateway  bool
		Sessions []inspect.SessionInfo
	}
	e.mustCall(t, "GET", "/admin/sessions", &out)
	if !out.Gateway || len(out.Sessions) != 1 || out.Sessions[0].Principal != "svc" || out.Sessions[0].Subscriptions[0].InFlight != 2 {
		t.Errorf("sessions: %+v", out)
	}
	e.mustCall(t, "POST", "/admin/sessions/disconnect?id=7", nil)
	if s := e.call(t, "POST", "/admin/sessions/disconnect?id=7", nil); s != http.StatusNotFound {
		t.Errorf("disconnect again: %d, want 404", s)
	}
	if s := e.call(t, "POST", "/admin/sessions/disconnect?id=x", nil); s != http.StatusBadRequest {
		t.Errorf("bad id: %d, want 400", s)
	}
}

// TestAdminRefused: without the admin right every admin route is refused,
// and ops endpoints with authentication but no AuthorizeAdmin refuse the
// whole admin API.
func TestAdminRefused(t *testing.T) {
	paths := []struct{ method, path string }{
		{"GET", "/admin/groups"}, {"POST", "/admin/groups/seek?topic=t&group=g&to=latest"},
		{"POST", "/admin/groups/pause?topic=t&group=g"}, {"POST", "/admin/groups/resume?topic=t&group=g"},
		{"DELETE", "/admin/groups?topic=t&group=g"}, {"GET", "/admin/topics?topic=t"}, {"POST", "/admin/topics?topic=t"},
		{"POST", "/admin/topics/purge?topic=t"}, {"DELETE", "/admin/topics?topic=t"}, {"GET", "/admin/deadletters?topic=t"},
		{"POST", "/admin/deadletters/redrive?topic=t&all=true"}, {"POST", "/admin/deadletters/discard?topic=t&all=true"},
		{"GET", "/admin/events?topic=t&seq=1"}, {"GET", "/admin/events/browse?topic=t"}, {"GET", "/admin/sessions"},
		{"POST", "/admin/sessions/disconnect?id=1"}, {"DELETE", "/admin/keys?topic=t&key=k"},
	}
	checked := map[string]bool{}
	for _, p := range paths {
		checked[p.method+" "+strings.Split(p.path, "?")[0]] = true
	}
	for _, pattern := range ops.AdminRoutes() {
		if !checked[pattern] {
			t.Errorf("admin route %s is not checked", pattern)
		}
	}
	forbidden, f1 := newFakeEnv(t, ops.Config{AuthorizeAdmin: func(*http.Request) (string, error) {
		return "reader", fmt.Errorf("%w: no admin scope", ops.ErrForbidden)
	}}, "t")
	unauth, f2 := newFakeEnv(t, ops.Config{AuthorizeAdmin: func(*http.Request) (string, error) {
		return "", errors.New("no token")
	}}, "t")
	noAdmin, f3 := newFakeEnv(t, ops.Config{Authorize: func(*http.Request) error { return nil }}, "t")
	for _, p := range paths {
		for _, c := range []struct {
			e    *env
			want int
		}{{forbidden, http.StatusForbidden}, {unauth, http.StatusUnauthorized}, {noAdmin, http.StatusForbidden}} {
			if s := c.e.call(t, p.method, p.path, nil); s != c.want {
				t.Errorf("%s %s: %d, want %d", p.method, p.path, s, c.want)
			}
		}
	}
	if n := f1.changes.Load() + f2.changes.Load() + f3.changes.Load(); n != 0 {
		t.Errorf("%d refused calls changed something", n)
	}
	if r, err := forbidden.logs.find("admin call refused"); err != nil || !strings.Contains(fmt.Sprint(r), "reader") {
		t.Errorf("no audit record of the refusal with its principal: %v %v", r, err)
	}
}

// isV7 reports whether id is a uuidv7, a position afterId, SEEK and
// from=id: take.
func isV7(id string) bool {
	_, ok := facade.IDTime(id)
	return ok
}

// TestResumeAfterDeadLetterAndRedriveByID: the ids the hub makes for dead
// letters and redriven events are positions: a consumer that stored the
// last id it saw resumes after it (afterId, setCursor by id, from=id:),
// while a caller's id that is not a uuidv7 is still refused clearly.
func TestResumeAfterDeadLetterAndRedriveByID(t *testing.T) {
	e := newEnv(t, jetstream.Config{}, ops.Config{})
	deadLetters(t, e, "adm.pos", 2)
	var list struct{ DeadLetters []deadLetter }
	e.mustCall(t, "GET", "/admin/deadletters?topic=adm.pos", &list)
	dl := list.DeadLetters
	if len(dl) != 2 || !isV7(dl[0].ID) || !isV7(dl[1].ID) {
		t.Fatalf("dead letters %+v: want two with uuidv7 ids", dl)
	}

	// first subscribes group to topic and returns the id of the first event
	// it receives.
	first := func(topic, group string, o facade.SubscribeOptions) string {
		t.Helper()
		got := make(chan string, 16)
		sub, err := e.bus.Subscribe(t.Context(), topic, group, func(_ context.Context, d facade.Delivery) error {
			got <- d.Event().ID
			return nil
		}, o)
		if err != nil {
			t.Fatalf("subscribe %s/%s: %v", topic, group, err)
		}
		defer sub.Stop(context.Background())
		select {
		case id := <-got:
			return id
		case <-time.After(10 * time.Second):
			t.Fatalf("%s/%s received nothing", topic, group)
			return ""
		}
	}
	// After a dead letter, by id: the next dead letter.
	if got := first("adm.pos.dlq", "reader", facade.SubscribeOptions{From: facade.FromAfterID, AfterID: dl[0].ID}); got != dl[1].ID {
		t.Fatalf("afterId %s on the dead-letter topic gave %s, want %s", dl[0].ID, got, dl[1].ID)
	}
	if err := e.bus.SetCursor(t.Context(), "adm.pos.dlq", "reader", facade.CursorPosition{LastID: dl[0].ID}); err != nil {
		t.Fatalf("setCursor to a dead letter's id: %v", err)
	}
	code, body, _ := e.get(t, "/replay?topic=adm.pos.dlq&from=id:"+dl[1].ID)
	if evs := decodeNDJSON(t, body); code != 200 || len(evs) != 1 || evs[0].ID != dl[1].ID {
		t.Fatalf("replay from=id:%s: %d %s", dl[1].ID, code, body)
	}

	// After a redriven event, by id: the event published after it.
	var r struct{ Events []struct{ ID string } }
	e.mustCall(t, "POST", fmt.Sprintf("/admin/deadletters/redrive?topic=adm.pos&seq=%d&keep=true", dl[0].Seq), &r)
	if len(r.Events) != 1 || !isV7(r.Events[0].ID) {
		t.Fatalf("redrive: %+v, want one event with a uuidv7 id", r)
	}
	next := publish(t, e.bus, "adm.pos", `{"after":"redrive"}`, "")
	if got := first("adm.pos", "resumer", facade.SubscribeOptions{From: facade.FromAfterID, AfterID: r.Events[0].ID}); got != next.ID {
		t.Fatalf("afterId %s (redriven) gave %s, want %s", r.Events[0].ID, got, next.ID)
	}
	if err := e.bus.SetCursor(t.Context(), "adm.pos", "resumer", facade.CursorPosition{LastID: r.Events[0].ID}); err != nil {
		t.Fatalf("setCursor to a redriven event's id: %v", err)
	}

	// A caller's own id that is not a uuidv7 keeps its clear error.
	own, err := e.bus.Publish(t.Context(), "adm.pos", json.RawMessage(`{"own":1}`), facade.PublishOptions{ID: "order-42"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.bus.Subscribe(t.Context(), "adm.pos", "own", func(context.Context, facade.Delivery) error { return nil },
		facade.SubscribeOptions{From: facade.FromAfterID, AfterID: own.ID})
	if !errors.Is(err, facade.ErrUnknownID) || !strings.Contains(err.Error(), "not a uuidv7") {
		t.Fatalf("afterId of the caller's id %q: %v, want unknown_id saying it is not a uuidv7", own.ID, err)
	}
}
