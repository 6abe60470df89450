package gateway

import (
	"strconv"
	"testing"
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
