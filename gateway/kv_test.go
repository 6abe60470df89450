package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/wire"
)

// TestHTTPCompareAndSet: Eventhub-Expected-Last-Seq makes an HTTP publish
// a compare-and-set of its key: 409 wrong_last_seq once the key moved, 400
// for a value that is not a position or without a key.
func TestHTTPCompareAndSet(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{Token: "tok"})
	url := g.http + "/publish/kv.cas"
	h := func(key, expected string) map[string]string {
		return map[string]string{"Authorization": "Bearer tok", HeaderKey: key, HeaderExpectedLastSeq: expected}
	}
	r := post(t, url, `{"v":1}`, h("k", "0"))
	if r.status != 200 {
		t.Fatalf("create: %d %v", r.status, r.body)
	}
	seq := strconv.FormatFloat(r.body["seq"].(float64), 'f', -1, 64)
	if r := post(t, url, `{"v":"lost"}`, h("k", "0")); r.status != 409 || errCodeOf(r) != "wrong_last_seq" {
		t.Fatalf("create of an existing key: %d %v, want 409 wrong_last_seq", r.status, r.body)
	}
	if r := post(t, url, `{"v":2}`, h("k", seq)); r.status != 200 {
		t.Fatalf("update at the read position: %d %v", r.status, r.body)
	}
	if r := post(t, url, `{"v":"lost"}`, h("k", seq)); r.status != 409 || errCodeOf(r) != "wrong_last_seq" {
		t.Fatalf("update at a stale position: %d %v, want 409 wrong_last_seq", r.status, r.body)
	}
	for _, bad := range []struct{ key, expected string }{{"k", "-1"}, {"k", "x"}, {"", "0"}} {
		if r := post(t, url, `{}`, h(bad.key, bad.expected)); r.status != 400 || errCodeOf(r) != "bad_request" {
			t.Errorf("key %q expected %q: %d %v, want 400 bad_request", bad.key, bad.expected, r.status, r.body)
		}
	}
}

func deleteReq(t *testing.T, url string, h map[string]string) httpResult {
	t.Helper()
	return do(t, http.MethodDelete, url, "", h)
}

// TestDeleteKeyNeedsPublishRight: deleting a key over WebSocket (DELETE)
// or HTTP (DELETE /publish/{topic}) is a write to the key's topic: a
// principal that may only subscribe to it is refused (forbidden, 403) and
// nothing is stored; one that may publish deletes it.
func TestDeleteKeyNeedsPublishRight(t *testing.T) {
	bus := newBus(t)
	auth := AuthenticatorFunc(func(_ context.Context, token string) (Principal, error) {
		switch token {
		case "reader":
			return testPrincipal{sub: []string{""}}, nil
		case "writer":
			return testPrincipal{pub: []string{"kv."}, sub: []string{""}}, nil
		}
		return nil, errors.New("unknown token")
	})
	g := newGateway(t, bus, Config{Authenticator: auth})
	rec, err := bus.Publish(t.Context(), "kv.acl", json.RawMessage(`{"v":1}`), facade.PublishOptions{Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	latest := func() uint64 {
		t.Helper()
		got, err := bus.LatestByKey(t.Context(), "kv.acl", []string{"k"})
		if err != nil {
			t.Fatal(err)
		}
		if e := got["k"]; e != nil {
			return e.Seq
		}
		return 0
	}

	reader := dialAuth(t, g.url, "reader")
	reader.errCode(wire.Frame{Op: wire.OpDelete, Topic: "kv.acl", Key: "k"}, wire.CodeForbidden)
	url := g.http + "/publish/kv.acl"
	if r := deleteReq(t, url, map[string]string{"Authorization": "Bearer reader", HeaderKey: "k"}); r.status != 403 || errCodeOf(r) != "forbidden" {
		t.Fatalf("HTTP delete without the publish right: %d %v, want 403 forbidden", r.status, r.body)
	}
	if got := latest(); got != rec.Seq {
		t.Fatalf("a refused delete moved the key to seq %d", got)
	}

	writer := dialAuth(t, g.url, "writer")
	ok := writer.ok(wire.Frame{Op: wire.OpDelete, Topic: "kv.acl", Key: "k"})
	if ok.ID == "" || ok.Seq <= rec.Seq {
		t.Fatalf("OK of DELETE %+v", ok)
	}
	if got := latest(); got != 0 {
		t.Fatalf("after DELETE the key still has its event at seq %d", got)
	}
	// Purging the key's history takes the admin scope beside the publish
	// right: a publisher cannot erase what was written.
	writer.errCode(wire.Frame{Op: wire.OpDelete, Topic: "kv.acl", Key: "k", Opts: json.RawMessage(`{"purge":true}`)}, wire.CodeForbidden)
	if r := deleteReq(t, url, map[string]string{"Authorization": "Bearer writer", HeaderKey: "k", HeaderPurge: "true"}); r.status != 403 || errCodeOf(r) != "forbidden" {
		t.Fatalf("HTTP purge without the admin scope: %d %v, want 403 forbidden", r.status, r.body)
	}
	writer.errCode(wire.Frame{Op: wire.OpDelete, Topic: "kv.acl"}, wire.CodeBadKey)
	writer.errCode(wire.Frame{Op: wire.OpDelete, Topic: "kv.acl", Key: "k", Opts: json.RawMessage(`{"purge":"yes"}`)}, wire.CodeBadFrame)
}

// TestHTTPDeleteKey: DELETE /publish/{topic} with Eventhub-Key stores a
// tombstone (answered with its id, seq and ts), Eventhub-Purge removes the
// key's history, Eventhub-Expected-Last-Seq makes it a compare-and-delete,
// and bad headers get 400.
func TestHTTPDeleteKey(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{Token: "tok"})
	url := g.http + "/publish/kv.http"
	h := func(kv ...string) map[string]string {
		m := map[string]string{"Authorization": "Bearer tok"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, v := range []string{`{"v":1}`, `{"v":2}`} {
		if r := post(t, url, v, h(HeaderKey, "k")); r.status != 200 {
			t.Fatalf("publish: %d %v", r.status, r.body)
		}
	}
	if r := deleteReq(t, url, h(HeaderKey, "k", HeaderExpectedLastSeq, "1")); r.status != 409 || errCodeOf(r) != "wrong_last_seq" {
		t.Fatalf("compare-and-delete at a stale position: %d %v, want 409 wrong_last_seq", r.status, r.body)
	}
	r := deleteReq(t, url, h(HeaderKey, "k", HeaderExpectedLastSeq, "2", HeaderPurge, "true"))
	if r.status != 200 || r.body["seq"] != float64(3) || r.body["id"] == "" {
		t.Fatalf("delete: %d %v", r.status, r.body)
	}
	st, err := bus.StreamState(t.Context(), "kv.http")
	if err != nil {
		t.Fatal(err)
	}
	if st.Messages != 1 {
		t.Fatalf("after a delete with purge the stream holds %d messages, want the tombstone only", st.Messages)
	}
	for _, bad := range []struct {
		h    map[string]string
		code string
	}{
		{h(), "bad_key"},
		{h(HeaderKey, "k", HeaderPurge, "maybe"), "bad_request"},
		{h(HeaderKey, "k", HeaderExpectedLastSeq, "-1"), "bad_request"},
	} {
		if r := deleteReq(t, url, bad.h); r.status != 400 || errCodeOf(r) != bad.code {
			t.Errorf("headers %v: %d %v, want 400 %s", bad.h, r.status, r.body, bad.code)
		}
	}
}

// TestHTTPPublishTTL: Eventhub-Ttl-Seconds gives the event a time to live
// in whole seconds; anything else is a 400.
func TestHTTPPublishTTL(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{Token: "tok"})
	url := g.http + "/publish/kv.ttl"
	h := func(ttl string) map[string]string {
		return map[string]string{"Authorization": "Bearer tok", HeaderKey: "k", HeaderTTLSeconds: ttl}
	}
	if r := post(t, url, `{}`, h("60")); r.status != 200 {
		t.Fatalf("ttl 60: %d %v", r.status, r.body)
	}
	e, err := bus.Admin().Event(t.Context(), "kv.ttl", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Headers["Nats-TTL"]; len(got) != 1 || got[0] != "60" {
		t.Fatalf("stored Nats-TTL %q, want 60", got)
	}
	for _, bad := range []string{"0", "-1", "1.5", "1m"} {
		if r := post(t, url, `{}`, h(bad)); r.status != 400 || errCodeOf(r) != "bad_request" {
			t.Errorf("ttl %q: %d %v, want 400 bad_request", bad, r.status, r.body)
		}
	}
}

// TestLiveSnapshotLeavesDeletedKeysOut: a live subscription with snapshot
// on a compacted topic gets no event of a deleted key, and a key deleted
// afterwards arrives as its tombstone (deleted, null payload), in order.
func TestLiveSnapshotLeavesDeletedKeysOut(t *testing.T) {
	bus := newBus(t, func(oc *jetstream.OpenConfig) {
		oc.Bus.Topics = append(oc.Bus.Topics, jetstream.TopicConfig{Pattern: "kvsnap.state", Compaction: true})
	})
	g := newGateway(t, bus, Config{})
	for _, k := range []string{"a", "b", "c"} {
		if _, err := bus.Publish(t.Context(), "kvsnap.state", json.RawMessage(`1`), facade.PublishOptions{Key: k}); err != nil {
			t.Fatal(err)
		}
	}
	del, err := bus.DeleteKey(t.Context(), "kvsnap.state", "a", facade.DeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := dialAuth(t, g.url, "")
	ok := c.ok(liveFrame("kvsnap.state", `{"snapshot":true}`))
	if ok.Seq != del.Seq {
		t.Fatalf("snapshot at %d, want the tombstone's position %d", ok.Seq, del.Seq)
	}
	var keys []string
	for _, e := range c.liveEvents(2) {
		keys = append(keys, e.Key)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"b", "c"}) {
		t.Fatalf("snapshot of keys %q, want [b c]", keys)
	}
	c.ok(wire.Frame{Op: wire.OpDelete, Topic: "kvsnap.state", Key: "b"})
	e := c.liveEvents(1)[0]
	if !e.Deleted || e.Key != "b" || string(e.Payload) != "null" {
		t.Fatalf("live event after deleting b: %+v (%s), want its tombstone", e, e.Payload)
	}
}

// TestLiveWatch: a live SUBSCRIBE with key_prefix watches the keys of a
// prefix: the snapshot holds their current values (deleted and other keys
// left out), the OK ends it, then their changes follow, deletes as
// tombstones; since resumes it; SSE takes key_prefix too. It needs the
// subscribe right on the topic.
func TestLiveWatch(t *testing.T) {
	bus := newBus(t)
	auth := AuthenticatorFunc(func(_ context.Context, token string) (Principal, error) {
		if token == "reader" {
			return testPrincipal{sub: []string{"kv."}}, nil
		}
		return nil, errors.New("unknown token")
	})
	g := newGateway(t, bus, Config{Authenticator: auth})
	pubKey := func(key, v string) *facade.EventRecord {
		t.Helper()
		e, err := bus.Publish(t.Context(), "kv.watch", json.RawMessage(v), facade.PublishOptions{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	del := func(key string) *facade.EventRecord {
		t.Helper()
		e, err := bus.DeleteKey(t.Context(), "kv.watch", key, facade.DeleteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	keysOf := func(es []*facade.EventRecord) []string {
		var out []string
		for _, e := range es {
			k := e.Key
			if e.Deleted {
				k = "-" + k
			}
			out = append(out, k)
		}
		return out
	}
	a1 := pubKey("room:a", `1`)
	pubKey("hall:x", `1`)
	pubKey("room:b", `1`)
	del("room:b")
	publish(t, bus, "kv.watch", `"unkeyed"`)

	c := dialAuth(t, g.url, "reader")
	c.errCode(liveFrame("secret.watch", `{"snapshot":true,"key_prefix":""}`), wire.CodeForbidden)
	c.errCode(liveFrame("kv.other", `{"key_prefix":"`+strings.Repeat("k", facade.MaxKeyLen+1)+`"}`), wire.CodeBadKey)
	ok := c.ok(liveFrame("kv.watch", `{"snapshot":true,"key_prefix":"room:"}`))
	if ok.Recovered == nil || !*ok.Recovered {
		t.Fatalf("watch OK %+v, want recovered", ok)
	}
	if got := c.liveEvents(1); got[0].ID != a1.ID {
		t.Fatalf("snapshot %v, want room:a", keysOf(got))
	}
	c.noEvent(200 * time.Millisecond)
	pubKey("hall:x", `2`)
	pubKey("room:c", `1`)
	publish(t, bus, "kv.watch", `"unkeyed"`)
	last := del("room:a")
	if got := keysOf(c.liveEvents(2)); !slices.Equal(got, []string{"room:c", "-room:a"}) {
		t.Fatalf("changes %v, want room:c, -room:a", got)
	}
	c.noEvent(200 * time.Millisecond)

	// Resumed after the last change seen.
	pubKey("room:d", `1`)
	pubKey("hall:x", `3`)
	r := dialAuth(t, g.url, "reader")
	r.ok(liveFrame("kv.watch", `{"since":{"seq":`+strconv.FormatUint(last.Seq, 10)+`},"key_prefix":"room:"}`))
	if got := keysOf(r.liveEvents(1)); !slices.Equal(got, []string{"room:d"}) {
		t.Fatalf("resumed with %v, want room:d", got)
	}
	r.noEvent(200 * time.Millisecond)

	// SSE.
	s, code := openSSE(t, g.http+"/sse/kv.watch?snapshot=true&key_prefix=room:&access_token=reader", nil)
	if code != http.StatusOK {
		t.Fatalf("SSE watch: %d", code)
	}
	var got []string
	for ev := s.next(); ev.event != "ready"; ev = s.next() {
		got = append(got, ev.data)
	}
	if len(got) != 2 || !strings.Contains(got[0], `"key":"room:c"`) || !strings.Contains(got[1], `"key":"room:d"`) {
		t.Fatalf("SSE snapshot %v, want room:c and room:d", got)
	}
	if _, code := openSSE(t, g.http+"/sse/secret.watch?snapshot=true&key_prefix=room:&access_token=reader", nil); code != http.StatusForbidden {
		t.Fatalf("SSE watch of a topic the token may not read: %d, want 403", code)
	}
}
