package facadetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
)

// watched collects what a watch hands over; a nil record is the marker
// that the current values are complete.
type watched chan *facade.EventRecord

func (w watched) fn(e *facade.EventRecord) { w <- e }

// next returns the next record handed over (nil: the marker).
func (w watched) next(t testing.TB) *facade.EventRecord {
	t.Helper()
	select {
	case e := <-w:
		return e
	case <-time.After(waitTimeout):
		t.Fatal("the watch handed nothing over within", waitTimeout)
		return nil
	}
}

// expect checks that the next records are events of the keys want, in
// order ("-key": a tombstone of key), then the marker when marker is set.
func (w watched) expect(t testing.TB, marker bool, want ...string) *facade.EventRecord {
	t.Helper()
	var last *facade.EventRecord
	for i, k := range want {
		e := w.next(t)
		if e == nil {
			t.Fatalf("watch %d: the marker, want %s", i, k)
		}
		del := strings.HasPrefix(k, "-")
		if e.Key != strings.TrimPrefix(k, "-") || e.Deleted != del || del && string(e.Payload) != "null" {
			t.Fatalf("watch %d: key %q deleted %v payload %s, want %s", i, e.Key, e.Deleted, e.Payload, k)
		}
		last = e
	}
	if marker {
		if e := w.next(t); e != nil {
			t.Fatalf("watch: key %q, want the end of the current values", e.Key)
		}
	}
	return last
}

// quiet checks that nothing more is handed over for a moment.
func (w watched) quiet(t testing.TB) {
	t.Helper()
	select {
	case e := <-w:
		if e == nil {
			t.Fatal("watch: an unexpected marker")
		}
		t.Fatalf("watch: unexpected key %q", e.Key)
	case <-time.After(300 * time.Millisecond):
	}
}

func watch(t testing.TB, kw facade.KeyWatcher, topic string, o facade.WatchOptions) watched {
	t.Helper()
	w := make(watched, 1000)
	sub, err := kw.Watch(t.Context(), topic, o, w.fn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Stop(context.Background()) })
	return w
}

// testWatch: a watch of a key prefix hands over the current value of each
// matching key (deleted and other keys left out), the end marker, then
// every change, deletes as tombstones; it resumes after the last event
// seen; UpdatesOnly starts with the marker.
func testWatch(t *testing.T, env Env) {
	b := env.NewBus(t)
	kw, ok := b.(facade.KeyWatcher)
	if !ok {
		t.Skip("the bus cannot watch keys")
	}
	kd := b.(facade.KeyDeleter)
	topic, _ := names(t)
	publish(t, b, topic, `{"v":1}`, facade.PublishOptions{Key: "room:a"})
	publish(t, b, topic, `{"v":1}`, facade.PublishOptions{Key: "room:b"})
	publish(t, b, topic, `{"v":1}`, facade.PublishOptions{Key: "hall:x"})
	publish(t, b, topic, `{"v":1}`, facade.PublishOptions{Key: "room:c"})
	publish(t, b, topic, `{"v":2}`, facade.PublishOptions{Key: "room:a"})
	if _, err := kd.DeleteKey(t.Context(), topic, "room:c", facade.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	publish(t, b, topic, `{"unkeyed":true}`, facade.PublishOptions{})

	w := watch(t, kw, topic, facade.WatchOptions{KeyPrefix: "room:"})
	if e := w.expect(t, true, "room:b", "room:a"); string(e.Payload) != `{"v":2}` {
		t.Fatalf("current value of room:a: %s", e.Payload)
	}
	// Another bus: over WebSocket a connection watches a topic once.
	b2 := env.NewBus(t)
	updates := watch(t, b2.(facade.KeyWatcher), topic, facade.WatchOptions{KeyPrefix: "room:", UpdatesOnly: true})
	updates.expect(t, true)

	publish(t, b, topic, `{"v":3}`, facade.PublishOptions{Key: "room:a"})
	publish(t, b, topic, `{"v":2}`, facade.PublishOptions{Key: "hall:x"})
	publish(t, b, topic, `{"unkeyed":true}`, facade.PublishOptions{})
	if _, err := kd.DeleteKey(t.Context(), topic, "room:b", facade.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	last := w.expect(t, false, "room:a", "-room:b")
	updates.expect(t, false, "room:a", "-room:b")
	w.quiet(t)

	// Resume after the last event seen, as after a restart of the watcher.
	publish(t, b, topic, `{"v":1}`, facade.PublishOptions{Key: "room:d"})
	publish(t, b, topic, `{"v":3}`, facade.PublishOptions{Key: "hall:x"})
	b3 := env.NewBus(t)
	resumed := watch(t, b3.(facade.KeyWatcher), topic, facade.WatchOptions{KeyPrefix: "room:", After: &last.Seq})
	resumed.expect(t, true, "room:d")
	publish(t, b, topic, `{"v":4}`, facade.PublishOptions{Key: "room:a"})
	resumed.expect(t, false, "room:a")

	// Every key.
	all := watch(t, env.NewBus(t).(facade.KeyWatcher), topic, facade.WatchOptions{})
	all.expect(t, true, "room:d", "hall:x", "room:a")

	if _, err := kw.Watch(t.Context(), topic, facade.WatchOptions{KeyPrefix: strings.Repeat("k", facade.MaxKeyLen+1)}, w.fn); !errors.Is(err, facade.ErrBadKey) {
		t.Fatalf("watch with a prefix longer than a key: %v, want bad_key", err)
	}
	if _, err := kw.Watch(t.Context(), "Bad Topic", facade.WatchOptions{}, w.fn); !errors.Is(err, facade.ErrBadTopic) {
		t.Fatalf("watch of a bad topic: %v, want bad_topic", err)
	}
}

// testWatchExpiry: on a topic with delete markers, a key whose event
// expires is deleted: Latest leaves it out, LatestByKey too, and a watch
// gets its tombstone.
func testWatchExpiry(t *testing.T, env Env) {
	b := env.NewBus(t)
	kw, ok := b.(facade.KeyWatcher)
	if !ok {
		t.Skip("the bus cannot watch keys")
	}
	topic, _ := names(t)
	topic = env.Expiring + "." + topic
	publish(t, b, topic, `{"status":"alive"}`, facade.PublishOptions{Key: "p1", TTLSeconds: 2})
	publish(t, b, topic, `{"status":"alive"}`, facade.PublishOptions{Key: "p2"})
	w := watch(t, kw, topic, facade.WatchOptions{})
	w.expect(t, true, "p1", "p2")
	if e := w.expect(t, false, "-p1"); e.ID == "" || e.Seq == 0 {
		t.Fatalf("the expired key's tombstone: %+v", e)
	}
	if kr, ok := b.(facade.KeyReader); ok {
		got, err := kr.LatestByKey(t.Context(), topic, []string{"p1", "p2"})
		if err != nil {
			t.Fatal(err)
		}
		if got["p1"] != nil || got["p2"] == nil {
			t.Fatalf("latest by key after p1 expired: %v", got)
		}
	}
	if ks, ok := b.(facade.KeyScanner); ok {
		var keys []string
		if _, err := ks.Latest(t.Context(), topic, func(e *facade.EventRecord) error {
			keys = append(keys, e.Key)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(keys) != 1 || keys[0] != "p2" {
			t.Fatalf("latest after p1 expired: %v, want [p2]", keys)
		}
	}
	// A new watch leaves the expired key out.
	watch(t, env.NewBus(t).(facade.KeyWatcher), topic, facade.WatchOptions{}).expect(t, true, "p2")
}
