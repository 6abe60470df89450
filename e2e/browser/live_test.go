package browser_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/eventhub/eventhub/facade"
)

// liveGot is what the test page's live handler records of one event.
type liveGot struct {
	ID       string          `json:"id"`
	Seq      uint64          `json:"seq"`
	Key      string          `json:"key"`
	Payload  json.RawMessage `json:"payload"`
	Replay   bool            `json:"replay"`
	Snapshot bool            `json:"snapshot"`
}

// liveReady is LiveReady of client.d.ts.
type liveReady struct {
	Recovered   bool    `json:"recovered"`
	Seq         uint64  `json:"seq"`
	First       *uint64 `json:"first"`
	Reconnected bool    `json:"reconnected"`
}

// TestClientLive runs client.live in Chromium against the real gateway: a
// page follows a topic, loses its connection (dropped by the gateway, then
// the gateway replaced) while events are published, and after each
// reconnect has every event exactly once, the missed ones recovered; a
// recovery larger than the gateway's limit says so. Snapshots of a
// compacted topic come before the OK, flagged. No consumer group is made.
func TestClientLive(t *testing.T) {
	const token = "l-s3cret"
	const topic = "web.live.t"
	st := newStack(t, token)
	b := newBrowser(t)
	b.do(t, "load a blank page", chromedp.Navigate(st.srv.URL+"/blank"))
	eval[bool](t, b, `import("/client.js").then(m => (window.hub = m, typeof m.LiveSubscription === "function"))`)

	var want []*facade.EventRecord
	publish := func(n int, what string) []*facade.EventRecord {
		t.Helper()
		var out []*facade.EventRecord
		for i := range n {
			e := st.publishJSON(t, topic, map[string]any{"what": what, "i": i}, facade.PublishOptions{})
			out = append(out, e)
			want = append(want, e)
		}
		return out
	}
	publish(2, "before") // not delivered: the subscription starts after them
	want = nil

	got := eval[string](t, b, `(async () => {
		window.lc = new hub.EventHubClient(undefined, {token: `+jsString(token)+`, backoff: {initialMs: 50, maxMs: 300}});
		window.liveGot = [];
		window.readies = [];
		window.lsub = await lc.live(`+jsString(topic)+`, (e, info) => {
			liveGot.push({id: e.id, seq: e.seq, key: e.key || "", payload: e.payload, replay: info.replay, snapshot: info.snapshot});
		}, {onReady(r) { readies.push(r); }});
		return [lsub.topic, lsub.seq, readies.length, JSON.stringify(lc.liveSubscriptions.map(s => s.topic))].join(" ");
	})()`)
	if want := topic + " 2 1 " + `["` + topic + `"]`; got != want { // seq: the topic's end when it subscribed
		t.Fatalf("live: %q, want %q", got, want)
	}

	// checkAll compares what the page received with want, in order, once
	// each; the recovered ones (these and earlier ones) with replay set.
	replayed := map[string]bool{}
	checkAll := func(t *testing.T, recovered []*facade.EventRecord) {
		t.Helper()
		b.waitJS(t, fmt.Sprintf("%d live events", len(want)), fmt.Sprintf(`liveGot.length >= %d`, len(want)))
		got := eval[[]liveGot](t, b, `liveGot`)
		if len(got) != len(want) {
			t.Fatalf("%d events delivered, want %d (each once)", len(got), len(want))
		}
		for _, e := range recovered {
			replayed[e.ID] = true
		}
		for i, g := range got {
			if g.ID != want[i].ID || g.Seq != want[i].Seq || g.Replay != replayed[g.ID] || g.Snapshot {
				t.Errorf("event %d: %+v, want id %s seq %d replay %v", i, g, want[i].ID, want[i].Seq, replayed[g.ID])
			}
		}
	}
	readyAt := func(t *testing.T, n int) liveReady {
		t.Helper()
		b.waitJS(t, fmt.Sprintf("OK number %d", n), fmt.Sprintf(`readies.length >= %d`, n))
		rs := eval[[]liveReady](t, b, `readies`)
		if len(rs) != n {
			t.Fatalf("%d OKs, want %d: %+v", len(rs), n, rs)
		}
		return rs[n-1]
	}
	if r := readyAt(t, 1); !r.Recovered || r.Reconnected {
		t.Errorf("first OK %+v, want recovered, not reconnected", r)
	}

	t.Run("live events", func(t *testing.T) {
		publish(3, "live")
		checkAll(t, nil)
		if seq := eval[uint64](t, b, `lsub.seq`); seq != want[len(want)-1].Seq {
			t.Errorf("lsub.seq %d, want %d", seq, want[len(want)-1].Seq)
		}
	})

	t.Run("the gateway drops the connection: missed events recovered", func(t *testing.T) {
		unblock := st.dropSessions(t)
		b.waitJS(t, "reconnecting", `lc.state === "reconnecting"`)
		missed := publish(4, "missed while dropped")
		unblock()
		r := readyAt(t, 2)
		if !r.Recovered || !r.Reconnected || r.Seq != missed[len(missed)-1].Seq || r.First != nil {
			t.Errorf("OK after the reconnect %+v, want recovered, reconnected, seq %d", r, missed[len(missed)-1].Seq)
		}
		publish(2, "live again")
		checkAll(t, missed)
	})

	t.Run("the gateway replaced: missed events recovered from the stream", func(t *testing.T) {
		st.blocked.Store(true)
		st.restartGateway(t)
		b.waitJS(t, "reconnecting", `lc.state === "reconnecting"`)
		missed := publish(3, "missed while replaced")
		st.blocked.Store(false)
		if r := readyAt(t, 3); !r.Recovered || !r.Reconnected {
			t.Errorf("OK after the restart %+v, want recovered and reconnected", r)
		}
		publish(1, "live on the new gateway")
		checkAll(t, missed)
	})

	t.Run("more missed than a recovery sends: recovered false", func(t *testing.T) {
		st.gwCfg.LiveRecoveryLimit = 2
		st.blocked.Store(true)
		st.restartGateway(t)
		b.waitJS(t, "reconnecting", `lc.state === "reconnecting"`)
		before := len(want)
		missed := publish(5, "too many missed")
		st.blocked.Store(false)
		r := readyAt(t, 4)
		if r.Recovered || !r.Reconnected || r.First == nil || *r.First == 0 || r.Seq != missed[4].Seq {
			t.Errorf("OK after an incomplete recovery %+v, want not recovered, reconnected, first set, seq %d", r, missed[4].Seq)
		}
		// The first two were sent; the rest are skipped, live goes on.
		want = append(want[:before], missed[:2]...)
		live := publish(1, "live after the gap")
		b.waitJS(t, "the live event after the gap", `liveGot.some(e => e.id === `+jsString(live[0].ID)+`)`)
		got := eval[[]liveGot](t, b, `liveGot`)
		if len(got) < before {
			t.Fatalf("%d events delivered, fewer than the %d before", len(got), before)
		}
		tail := got[before:]
		if len(tail) != 3 || tail[0].ID != missed[0].ID || tail[1].ID != missed[1].ID || !tail[0].Replay || !tail[1].Replay ||
			tail[2].ID != live[0].ID || tail[2].Replay {
			t.Errorf("after an incomplete recovery got %+v, want %s, %s (replayed), %s", tail, missed[0].ID, missed[1].ID, live[0].ID)
		}
	})

	t.Run("a snapshot of a compacted topic before the OK, then live", func(t *testing.T) {
		pub := func(key string, v int) *facade.EventRecord {
			return st.publishJSON(t, "process.state", map[string]int{"v": v}, facade.PublishOptions{Key: key})
		}
		pub("a", 1)
		pub("b", 1)
		a2 := pub("a", 2)
		got := eval[string](t, b, `(async () => {
			window.snapGot = [];
			window.snapReady = null;
			window.ssub = await lc.live("process.state", (e, info) => {
				snapGot.push({id: e.id, seq: e.seq, key: e.key, payload: e.payload, replay: info.replay, snapshot: info.snapshot});
			}, {snapshot: true, onReady(r) { snapReady = {...r, events: snapGot.length}; }});
			return JSON.stringify(snapReady);
		})()`)
		var r struct {
			liveReady
			Events int `json:"events"`
		}
		if err := json.Unmarshal([]byte(got), &r); err != nil {
			t.Fatal(err)
		}
		// The OK came after both snapshot events; it has the snapshot's position.
		if !r.Recovered || r.Reconnected || r.Seq != a2.Seq || r.Events != 2 {
			t.Errorf("snapshot OK %s, want recovered at %d after 2 events", got, a2.Seq)
		}
		b2 := pub("b", 2)
		b.waitJS(t, "the live event after the snapshot", `snapGot.length >= 3`)
		snap := eval[[]liveGot](t, b, `snapGot`)
		keys := map[string]string{}
		for _, e := range snap[:2] {
			if !e.Snapshot || !e.Replay {
				t.Errorf("snapshot event %+v not flagged snapshot and replay", e)
			}
			keys[e.Key] = string(e.Payload)
		}
		if keys["a"] != `{"v":2}` || keys["b"] != `{"v":1}` {
			t.Errorf("snapshot %v, want a {\"v\":2} and b {\"v\":1}", keys)
		}
		if e := snap[2]; e.ID != b2.ID || e.Snapshot || e.Replay {
			t.Errorf("after the snapshot %+v, want %s live", e, b2.ID)
		}
	})

	t.Run("a watch keeps to the keys with its keyPrefix, snapshot and live", func(t *testing.T) {
		pub := func(key string, v int) *facade.EventRecord {
			return st.publishJSON(t, "process.state", map[string]int{"v": v}, facade.PublishOptions{Key: key})
		}
		pub("room:x", 1)
		pub("desk:y", 1)
		got := eval[string](t, b, `(async () => {
			await ssub.unsubscribe();
			window.watchGot = [];
			await lc.live("process.state", e => { watchGot.push(e.key + "=" + JSON.stringify(e.payload)); },
				{snapshot: true, keyPrefix: "room:"});
			return watchGot.join(",");
		})()`)
		if got != `room:x={"v":1}` {
			t.Errorf("watch snapshot %q, want only room:x", got)
		}
		// desk:y's change is stored first: had it passed the filter, it
		// would have arrived before room:x's.
		pub("desk:y", 2)
		pub("room:x", 2)
		b.waitJS(t, "room:x's change", `watchGot.length >= 2`)
		if got := eval[string](t, b, `watchGot.join(",")`); got != `room:x={"v":1},room:x={"v":2}` {
			t.Errorf("watch %q, want room:x's snapshot and change only", got)
		}
	})

	t.Run("refusals and unlive", func(t *testing.T) {
		got := eval[string](t, b, `(async () => {
			const code = p => p.then(() => "resolved", e => e.code || e.name);
			return [
				await code(lc.live(`+jsString(topic)+`, () => {})),
				await code(lc.live("web.live.other", () => {}, {snapshot: true, since: 3})),
				await code(lc.live("web.live.other", () => {}, {since: -1})),
				await code(lc.live("web.live.other", () => {}, {keyPrefix: ""})),
				await code(lc.live("bad topic", () => {})),
				await code(lc.unlive("web.live.never")),
			].join(",");
		})()`)
		if got != "already_subscribed,TypeError,TypeError,TypeError,bad_topic,not_subscribed" {
			t.Errorf("refusals: %q", got)
		}
		// Unfollowed on the gateway too: following again is not already_subscribed.
		got = eval[string](t, b, `(async () => {
			await lsub.unsubscribe();
			window.again = [];
			const s2 = await lc.live(`+jsString(topic)+`, e => { again.push(e.id); });
			return [lsub.closed, s2.closed, lc.liveSubscriptions.length].join(",");
		})()`)
		if got != "true,false,2" {
			t.Errorf("unlive: %q, want true,false,2", got)
		}
		before := eval[int](t, b, `liveGot.length`)
		e := st.publishJSON(t, topic, "after unlive", facade.PublishOptions{})
		b.waitJS(t, "the event on the new subscription", `again.includes(`+jsString(e.ID)+`)`)
		if n := eval[int](t, b, `liveGot.length`); n != before {
			t.Errorf("the ended subscription's handler got %d more events", n-before)
		}
	})

	if g := st.groupsOf(t, topic); len(g) != 0 {
		t.Errorf("consumer groups on %s: %q, want none", topic, g)
	}
	eval[bool](t, b, `(lc.close(), true)`)
	if p := b.problems(); len(p) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(p, "\n"))
	}
}
