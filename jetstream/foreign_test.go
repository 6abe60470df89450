package jetstream_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/jetstream"
)

// TestForeignEventsReadBackInOneShape: a plain NATS publisher can store
// what the hub refuses (a key token outside the key encoding, a literal
// wildcard among them, an id that is not printable ASCII, a negative
// time); every reader gets such an
// event in one shape: its topic's, with the token as its key, a made-up id
// and the stored time.
func TestForeignEventsReadBackInOneShape(t *testing.T) {
	b, nc := newBus(t, jetstream.Config{})
	first := pub(t, b, "pay.card", `{"n":0}`, "k0") // the topic's stream
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ subject, key, id, ts string }{
		{"pay.card._k.%ZZ", "%ZZ", "an id with spaces", "-5"},
		{"pay.card._k.%FF", "%FF", "ok-id", "soon"},
		{"pay.card._k.*", "*", "ok-id-2", "-1"},
	} {
		m := nats.NewMsg(tc.subject)
		m.Data = []byte(`{"n":1}`)
		m.Header.Set(jetstream.HeaderID, tc.id)
		m.Header.Set(jetstream.HeaderTS, tc.ts)
		ack, err := js.PublishMsg(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := b.Admin().Event(t.Context(), "pay.card", ack.Sequence)
		if err != nil {
			t.Fatal(err)
		}
		e := ev.Event
		if e.Topic != "pay.card" || e.Key != tc.key {
			t.Errorf("%s: read back as topic %q key %q", tc.subject, e.Topic, e.Key)
		}
		if tc.id == "an id with spaces" && e.ID == tc.id {
			t.Errorf("%s: id %q read back as it was", tc.subject, e.ID)
		}
		if e.ID == "" || e.TS <= 0 || time.UnixMilli(e.TS).Before(time.UnixMilli(first.TS).Add(-time.Minute)) {
			t.Errorf("%s: id %q, time %d", tc.subject, e.ID, e.TS)
		}
	}
}
