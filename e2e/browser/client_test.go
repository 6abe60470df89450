package browser_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
)

type jsError struct {
	Name  string `json:"name"`
	Code  string `json:"code"`
	Msg   string `json:"msg"`
	State string `json:"state"`
}

type jsEvent struct {
	Type        string `json:"type"`
	Code        int    `json:"code"`
	Reconnected bool   `json:"reconnected"`
	Will        bool   `json:"willReconnect"`
	Error       string `json:"error"`
}

// cursorAt waits until group's cursor on topic is at seq (everything up to
// seq acknowledged).
func (st *stack) cursorAt(t testing.TB, topic, group string, seq uint64) {
	t.Helper()
	testutil.CheckFor(t, waitTimeout, func() error {
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		defer cancel()
		c, err := st.bus.GetCursor(ctx, topic, group)
		if err != nil {
			return err
		}
		if c.LastSeq != seq {
			return fmt.Errorf("cursor of %s/%s at %d, want %d", topic, group, c.LastSeq, seq)
		}
		return nil
	})
}

// TestClientJS runs client.js in Chromium against the real gateway (static
// token) on embedded NATS, and against a scripted peer for what the gateway
// never does.
func TestClientJS(t *testing.T) {
	const token = "c-s3cret"
	st := newStack(t, token)
	b := newBrowser(t)
	b.do(t, "load a blank page", chromedp.Navigate(st.srv.URL+"/blank"))
	if !eval[bool](t, b, `import("/client.js").then(m => (window.hub = m,
		m.PromClient === m.EventHubClient && m.default === m.EventHubClient))`) {
		t.Fatal("client.js does not export EventHubClient as PromClient and default")
	}
	eval[bool](t, b, `(window.TOKEN = `+jsString(token)+`, true)`)

	t.Run("connect rejects a bad token with its code", func(t *testing.T) {
		got := eval[jsError](t, b, `(async () => {
			const c = new hub.EventHubClient(undefined, {token: "wrong", reconnect: false});
			try { await c.connect(); return {name: "resolved"}; }
			catch (e) { return {name: e.name, code: e.code, msg: e.msg, state: c.state}; }
		})()`)
		if got.Name != "EventHubError" || got.Code != "bad_token" || got.State != "closed" {
			t.Errorf("connect with a bad token: %+v, want EventHubError bad_token, state closed", got)
		}
	})

	t.Run("connect resolves on the OK of AUTH, not on another OK", func(t *testing.T) {
		got := eval[jsError](t, b, `(async () => {
			const c = new hub.EventHubClient("/fake-ws?mode=wrongcorr", {requestTimeoutMs: 1500, reconnect: false});
			try { await c.connect(); return {name: "resolved", state: c.state}; }
			catch (e) { return {name: e.name, code: e.code, msg: e.msg, state: c.state}; }
		})()`)
		if got.Code != "timeout" || got.State != "closed" {
			t.Errorf("connect answered only by foreign OKs: %+v, want timeout", got)
		}
	})

	t.Run("publish waits for its own answer", func(t *testing.T) {
		got := eval[jsError](t, b, `(async () => {
			const c = new hub.EventHubClient("/fake-ws?mode=puberr", {reconnect: false});
			await c.connect();
			try { const r = await c.publish("x.y", 1); return {name: "resolved " + JSON.stringify(r)}; }
			catch (e) { return {name: e.name, code: e.code, msg: e.msg}; }
			finally { c.close(); }
		})()`)
		if got.Code != "publish_failed" || got.Msg != "scripted failure" {
			t.Errorf("publish answered by a foreign OK then its ERR: %+v, want publish_failed", got)
		}
	})

	t.Run("asks for batches and reads them, unless batch: false", func(t *testing.T) {
		got := eval[string](t, b, `(async () => {
			const c = new hub.EventHubClient("/fake-ws?mode=batch", {reconnect: false});
			await c.connect();
			const r = await c.publish("x.y", 1);
			c.close();
			const off = new hub.EventHubClient("/fake-ws?mode=batch", {reconnect: false, batch: false});
			try { await off.connect(); return "connected without batch"; }
			catch (e) { return r.id + " " + e.code; }
		})()`)
		if want := "batch-id no_batch"; got != want {
			t.Errorf("batched answers: %q, want %q", got, want)
		}
	})

	t.Run("events before the OK of SUBSCRIBE reach the handler", func(t *testing.T) {
		got := eval[string](t, b, `(async () => {
			const c = new hub.EventHubClient("/fake-ws?mode=eventfirst", {reconnect: false});
			const seen = new Promise(resolve => c.addEventListener("error", e => {
				if (e.detail.error.code === "seen") resolve(e.detail.error.msg);
			}));
			const got = [];
			await c.subscribe("early.topic", "g", (e, ctx) => { got.push(e.id + "@" + ctx.attempt); });
			const ack = JSON.parse(await seen);
			c.close();
			return got.join(",") + " " + [ack.op, ack.topic, ack.group, ack.id, ack.attempt, "corr" in ack].join(",");
		})()`)
		// The ACK is sent without corr and fenced by the delivered attempt.
		if want := "e-1@3 ACK,early.topic,g,e-1,3,false"; got != want {
			t.Errorf("event before OK: %q, want %q", got, want)
		}
	})

	// One client for the rest, on the real gateway; its events are recorded.
	state := eval[string](t, b, `(async () => {
		window.c = new hub.EventHubClient(undefined, {token: TOKEN, backoff: {initialMs: 50, maxMs: 500}});
		window.events = [];
		for (const type of ["open", "close", "error"]) {
			c.addEventListener(type, e => events.push({type, code: e.detail.code || 0,
				reconnected: !!e.detail.reconnected, willReconnect: !!e.detail.willReconnect,
				error: e.detail.error ? e.detail.error.code : ""}));
		}
		await c.connect();
		return c.state + " " + c.url;
	})()`)
	wantURL := "ws" + strings.TrimPrefix(st.srv.URL, "http") + "/ws"
	if state != "open "+wantURL {
		t.Fatalf("connect: %q, want %q", state, "open "+wantURL)
	}

	t.Run("the gateway at / through the site", func(t *testing.T) {
		got := eval[string](t, b, `(async () => {
			const c2 = new hub.EventHubClient("/", {token: TOKEN, reconnect: false});
			await c2.connect();
			const r = await c2.publish("web.client.root", {n: 3});
			c2.close();
			return c2.url + " " + (typeof r.id === "string" && r.id.length > 0);
		})()`)
		if want := "ws" + strings.TrimPrefix(st.srv.URL, "http") + "/ true"; got != want {
			t.Errorf("client at /: %q, want %q", got, want)
		}
	})

	t.Run("publish resolves with the stored event's id", func(t *testing.T) {
		type pubResult struct {
			ID  string `json:"id"`
			Seq uint64 `json:"seq"`
			TS  int64  `json:"ts"`
		}
		r := eval[pubResult](t, b, `c.publish("web.client.pub", {n: 1}, {key: "k1", headers: {"trace-id": "t1"}})`)
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		defer cancel()
		recs, err := st.bus.LatestByKey(ctx, "web.client.pub", []string{"k1"})
		if err != nil {
			t.Fatal(err)
		}
		rec := recs["k1"]
		if rec == nil || rec.ID != r.ID || rec.Seq != r.Seq || rec.TS != r.TS || string(rec.Payload) != `{"n":1}` || rec.Headers["trace-id"] != "t1" {
			t.Errorf("publish returned %+v; the bus has %+v", r, rec)
		}
		for _, tc := range []struct{ expr, want string }{
			{`c.publish("bad topic", 1)`, "bad_topic"},
			{`c.publish("process.state", {x: 1})`, "key_required"},
			{`c.publish("web.client.pub", undefined)`, "TypeError"},
		} {
			got := eval[string](t, b, tc.expr+`.then(() => "resolved", e => e.code || e.name)`)
			if got != tc.want {
				t.Errorf("%s: %q, want %q", tc.expr, got, tc.want)
			}
		}
	})

	// Two events before the subscription (from earliest), two after.
	var subIDs []string
	for i := range 2 {
		subIDs = append(subIDs, st.publishJSON(t, "web.client.sub", map[string]int{"i": i}, facade.PublishOptions{}).ID)
	}
	if got := eval[string](t, b, `(async () => {
		window.got = [];
		window.sub = await c.subscribe("web.client.sub", "g-auto", (e, ctx) => {
			got.push({id: e.id, attempt: ctx.attempt, deadline: ctx.ack_deadline_ms, i: e.payload.i});
		}, {from: "earliest", ackTimeoutMs: 20000});
		return sub.topic + "/" + sub.group;
	})()`); got != "web.client.sub/g-auto" {
		t.Fatalf("subscribe: %q", got)
	}

	t.Run("subscribe delivers once and acknowledges automatically", func(t *testing.T) {
		for i := 2; i < 4; i++ {
			subIDs = append(subIDs, st.publishJSON(t, "web.client.sub", map[string]int{"i": i}, facade.PublishOptions{}).ID)
		}
		b.waitJS(t, "4 events", `got.length >= 4`)
		st.cursorAt(t, "web.client.sub", "g-auto", 4)
		type delivery struct {
			ID       string `json:"id"`
			Attempt  int    `json:"attempt"`
			Deadline int64  `json:"deadline"`
			I        int    `json:"i"`
		}
		got := eval[[]delivery](t, b, `got`)
		if len(got) != 4 {
			t.Fatalf("%d deliveries, want 4 (once each): %+v", len(got), got)
		}
		for i, d := range got {
			if d.ID != subIDs[i] || d.I != i || d.Attempt != 1 || d.Deadline <= 0 || d.Deadline > 20000 {
				t.Errorf("delivery %d = %+v, want id %s, attempt 1, deadline in (0, 20000]", i, d, subIDs[i])
			}
		}
	})

	t.Run("trace context reaches group and live handlers", func(t *testing.T) {
		eval[bool](t, b, `(async () => {
			window.traces = [];
			await c.subscribe("web.client.trace", "g-trace", (e, ctx) => { traces.push("group " + (ctx.trace ? ctx.trace.traceparent + " " + ctx.trace.tracestate : "none")); });
			await c.live("web.client.trace", (e, info) => { traces.push("live " + (info.trace ? info.trace.traceparent : "none")); });
			return true;
		})()`)
		const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		msg := &nats.Msg{Subject: "web.client.trace", Data: []byte(`1`), Header: nats.Header{"traceparent": {tp}, "tracestate": {"v=1"}}}
		if _, err := st.bus.JetStream().PublishMsg(t.Context(), msg); err != nil {
			t.Fatal(err)
		}
		b.waitJS(t, "2 traced events", `traces.length >= 2`)
		got := eval[[]string](t, b, `traces.sort()`)
		if want := []string{"group " + tp + " v=1", "live " + tp}; !slices.Equal(got, want) {
			t.Errorf("handlers saw %q, want %q", got, want)
		}
	})

	t.Run("a handler that throws gets the event again", func(t *testing.T) {
		eval[bool](t, b, `(window.attempts = [], c.subscribe("web.client.nack", "g-nack", (e, ctx) => {
			attempts.push(ctx.attempt);
			if (ctx.attempt === 1) throw new Error("boom on the first attempt");
		}, {from: "earliest"}).then(() => true))`)
		st.publishJSON(t, "web.client.nack", "x", facade.PublishOptions{})
		b.waitJS(t, "the second attempt", `attempts.length >= 2`)
		st.cursorAt(t, "web.client.nack", "g-nack", 1)
		if got := eval[[]int](t, b, `attempts`); len(got) != 2 || got[0] != 1 || got[1] != 2 {
			t.Errorf("attempts %v, want [1 2]", got)
		}
	})

	t.Run("retry policy: a throw waits the group's delay; another policy is refused", func(t *testing.T) {
		eval[bool](t, b, `(window.retried = [], c.subscribe("web.client.retry", "g-retry", (e, ctx) => {
			retried.push(Date.now());
			if (ctx.attempt === 1) throw new Error("boom on the first attempt");
		}, {from: "earliest", retry: {backoffMs: [700]}}).then(() => true))`)
		st.publishJSON(t, "web.client.retry", "x", facade.PublishOptions{})
		b.waitJS(t, "the second attempt", `retried.length >= 2`)
		if gap := eval[int64](t, b, `retried[1] - retried[0]`); gap < 700 {
			t.Errorf("second attempt %d ms after the first, want at least the group's 700", gap)
		}
		got := eval[string](t, b, `(async () => {
			const c2 = new hub.EventHubClient(undefined, {token: TOKEN, reconnect: false});
			await c2.connect();
			try { await c2.subscribe("web.client.retry", "g-retry", () => {}, {retry: {minBackoffMs: 50}}); return "resolved"; }
			catch (e) { return e.code; }
			finally { c2.close(); }
		})()`)
		if got != "conflicting_option" {
			t.Errorf("a second policy for the group: %q, want conflicting_option", got)
		}
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		defer cancel()
		g, err := st.bus.Admin().Group(ctx, "web.client.retry", "g-retry")
		if err != nil {
			t.Fatal(err)
		}
		if !g.Retry.Equal(facade.RetryPolicy{BackoffMs: []int64{700}}) || g.RetryDefault {
			t.Errorf("the group's retry policy %+v (default %v), want [700]", g.Retry, g.RetryDefault)
		}
	})

	t.Run("ordered by key: a key's next event waits for the one before, other keys go on", func(t *testing.T) {
		eval[bool](t, b, `(window.ordered = [], c.subscribe("web.client.order", "g-order", e => { ordered.push(e.key + e.payload); },
			{manualAck: true, from: "earliest", orderBy: "key"}).then(s => (window.osub = s, true)))`)
		a1 := st.publishJSON(t, "web.client.order", 1, facade.PublishOptions{Key: "a"})
		st.publishJSON(t, "web.client.order", 2, facade.PublishOptions{Key: "a"})
		st.publishJSON(t, "web.client.order", 1, facade.PublishOptions{Key: "b"})
		b.waitJS(t, "a1 and b1", `ordered.length >= 2`)
		// a2 is held while a1 is unsettled: settling a1 is what lets it go.
		if got := eval[[]string](t, b, `ordered.slice().sort()`); !slices.Equal(got, []string{"a1", "b1"}) {
			t.Fatalf("before a1 is acknowledged: %q, want a1 and b1 only", got)
		}
		eval[bool](t, b, `osub.ack(`+jsString(a1.ID)+`).then(() => true)`)
		b.waitJS(t, "a2 after a1's ack", `ordered.includes("a2")`)
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		defer cancel()
		g, err := st.bus.Admin().Group(ctx, "web.client.order", "g-order")
		if err != nil {
			t.Fatal(err)
		}
		if g.OrderBy != facade.OrderByKey {
			t.Errorf("the group's orderBy %q, want key", g.OrderBy)
		}
	})

	t.Run("manual acknowledgement", func(t *testing.T) {
		eval[bool](t, b, `(window.manual = [], c.subscribe("web.client.manual", "g-manual", e => { manual.push(e.id); },
			{manualAck: true, from: "earliest"}).then(s => (window.msub = s, s.manualAck)))`)
		rec := st.publishJSON(t, "web.client.manual", 1, facade.PublishOptions{})
		b.waitJS(t, "the manual delivery", `manual.length === 1`)
		got := eval[string](t, b, `(async () => {
			const id = manual[0];
			await c.modAck("web.client.manual", "g-manual", id, 5000);
			await msub.ack(id);
			try { await msub.ack(id); return "second ack resolved"; } catch (e) { return id + " " + e.code; }
		})()`)
		if got != rec.ID+" unknown_id" {
			t.Errorf("manual ack: %q, want %q", got, rec.ID+" unknown_id")
		}
		st.cursorAt(t, "web.client.manual", "g-manual", 1)
	})

	t.Run("a lost connection rejects pending requests, then reconnects and subscribes again", func(t *testing.T) {
		got := eval[string](t, b, `(async () => {
			const ws = c.socket, send = ws.send.bind(ws);
			ws.send = data => { send(data); if (data.includes('"PUBLISH"')) ws.close(); };
			try { await c.publish("web.client.pub", {n: 2}); return "resolved"; } catch (e) { return e.code; }
		})()`)
		if got != "unavailable" {
			t.Errorf("publish pending when the socket closed: %q, want unavailable", got)
		}
		b.waitJS(t, "reconnected", `c.state === "open" && events.some(e => e.type === "open" && e.reconnected)`)
		rec := st.publishJSON(t, "web.client.sub", map[string]int{"i": 4}, facade.PublishOptions{})
		b.waitJS(t, "an event after the reconnect", `got.some(d => d.id === `+jsString(rec.ID)+`)`)
		st.cursorAt(t, "web.client.sub", "g-auto", 5)
	})

	t.Run("the gateway going away: reconnect and subscribe again", func(t *testing.T) {
		st.restartGateway(t)
		b.waitJS(t, "the going-away close", `events.some(e => e.type === "close" && e.code === 1001 && e.willReconnect)`)
		b.waitJS(t, "reconnected", `c.state === "open"`)
		rec := st.publishJSON(t, "web.client.sub", map[string]int{"i": 5}, facade.PublishOptions{})
		b.waitJS(t, "an event from the new gateway", `got.some(d => d.id === `+jsString(rec.ID)+`)`)
		st.cursorAt(t, "web.client.sub", "g-auto", 6)
		if n := eval[int](t, b, `got.length`); n != 6 {
			t.Errorf("%d deliveries, want 6 (once each)", n)
		}
	})

	t.Run("unsubscribe", func(t *testing.T) {
		got := eval[string](t, b, `(async () => {
			await sub.unsubscribe();
			let again;
			try { await c.unsubscribe("web.client.sub", "g-auto"); again = "resolved"; } catch (e) { again = e.code; }
			// The gateway no longer holds it: subscribing again is not already_subscribed.
			const s2 = await c.subscribe("web.client.sub", "g-auto", () => {});
			await s2.unsubscribe();
			return [sub.closed, again, s2.closed].join(",");
		})()`)
		if got != "true,not_subscribed,true" {
			t.Errorf("unsubscribe: %q, want true,not_subscribed,true", got)
		}
	})

	t.Run("close", func(t *testing.T) {
		got := eval[string](t, b, `(async () => {
			c.close(); c.close();
			const code = await c.publish("web.client.pub", 1).then(() => "resolved", e => e.code);
			return c.state + " " + code;
		})()`)
		if got != "closed closed" {
			t.Errorf("after close: %q, want closed closed", got)
		}
	})

	var evs []jsEvent
	raw := eval[string](t, b, `JSON.stringify(events)`)
	if err := json.Unmarshal([]byte(raw), &evs); err != nil {
		t.Fatal(err)
	}
	var seq []string
	for _, e := range evs {
		if e.Type != "error" { // failed reconnect attempts, if any
			seq = append(seq, fmt.Sprintf("%s/%d/%v/%v", e.Type, e.Code, e.Reconnected, e.Will))
		}
	}
	// open; the socket closed under the client; open again; the gateway
	// going away; open again; close().
	if len(seq) != 6 || seq[0] != "open/0/false/false" || !strings.HasPrefix(seq[1], "close/") || !strings.HasSuffix(seq[1], "/true") ||
		seq[2] != "open/0/true/false" || seq[3] != "close/1001/false/true" || seq[4] != "open/0/true/false" || seq[5] != "close/1000/false/false" {
		t.Errorf("client events %q", seq)
	}
	if p := b.problems(); len(p) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(p, "\n"))
	}
}
