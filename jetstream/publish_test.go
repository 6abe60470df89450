package jetstream_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/jetstream"
)

// storedHeaders reads the message at seq of topic's stream as a plain
// client does.
func storedHeaders(t *testing.T, b *jetstream.Bus, topic string, seq uint64) nats.Header {
	t.Helper()
	ti, err := b.LookupTopic(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ti.Stream.GetMsg(t.Context(), seq)
	if err != nil {
		t.Fatal(err)
	}
	return raw.Header
}

// TestPublishIDHeaders: on a single-replica stream, an event whose id the
// hub makes carries no id at all (nothing can send it twice): only its time
// in Eventhub-Ts, and its id is the position id of its topic, time and
// sequence. An id the caller supplies travels in Eventhub-Id and
// Nats-Msg-Id, so that a repeat of it, sync or async, is stored once and
// answered with the stored event.
func TestPublishIDHeaders(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{})
	ctx := t.Context()
	const topic = "hdr.t"

	positioned := func(what string, e *facade.EventRecord) {
		t.Helper()
		h := storedHeaders(t, b, topic, e.Seq)
		if h.Get(jetstream.HeaderID) != "" || h.Get(jetstream.HeaderMsgID) != "" || h.Get(jetstream.HeaderTS) != strconv.FormatInt(e.TS, 10) {
			t.Fatalf("%s, hub-made id %s: headers %v, want %s only", what, e.ID, h, jetstream.HeaderTS)
		}
		if e.ID != jetstream.PosID(topic, e.TS, e.Seq) {
			t.Fatalf("%s: id %s, want the position id %s", what, e.ID, jetstream.PosID(topic, e.TS, e.Seq))
		}
		if at, ok := facade.IDTime(e.ID); !ok || at.UnixMilli() != e.TS {
			t.Fatalf("%s: id %s is not a uuidv7 of the event's time %d", what, e.ID, e.TS)
		}
	}
	positioned("sync publish", pub(t, b, topic, `{"n":1}`, ""))
	f, err := b.PublishAsync(ctx, topic, json.RawMessage(`{"n":2}`), facade.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ea, err := f.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	positioned("async publish", ea)

	// A time of the caller's: the event carries a uuidv7 of the hub's, in
	// Eventhub-Id only.
	et, err := b.Publish(ctx, topic, json.RawMessage(`{"n":3}`), facade.PublishOptions{TS: 1_700_000_000_000})
	if err != nil {
		t.Fatal(err)
	}
	if h := storedHeaders(t, b, topic, et.Seq); h.Get(jetstream.HeaderID) != et.ID || h.Get(jetstream.HeaderMsgID) != "" || h.Get(jetstream.HeaderTS) != "1700000000000" {
		t.Fatalf("publish with a time of the caller's, hub-made id %s: headers %v, want the id in %s only", et.ID, h, jetstream.HeaderID)
	}

	for _, async := range []bool{false, true} {
		id := "order-sync"
		if async {
			id = "order-async"
		}
		publish := func(payload string) *facade.EventRecord {
			t.Helper()
			o := facade.PublishOptions{ID: id}
			if !async {
				r, err := b.Publish(ctx, topic, json.RawMessage(payload), o)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			f, err := b.PublishAsync(ctx, topic, json.RawMessage(payload), o)
			if err != nil {
				t.Fatal(err)
			}
			r, err := f.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		first := publish(`{"try":1}`)
		h := storedHeaders(t, b, topic, first.Seq)
		if h.Get(jetstream.HeaderID) != id || h.Get(jetstream.HeaderMsgID) != id {
			t.Fatalf("caller id %s (async %v): headers %v, want it in both id headers", id, async, h)
		}
		again := publish(`{"try":2}`)
		if again.Seq != first.Seq || string(again.Payload) != `{"try":1}` {
			t.Fatalf("repeat of id %s (async %v) answered seq %d payload %s, want the stored seq %d and payload", id, async, again.Seq, again.Payload, first.Seq)
		}
	}
	ti, err := b.LookupTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ti.Stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 5 {
		t.Fatalf("%d messages stored, want 5 (each repeat stored once)", info.State.Msgs)
	}
}

// TestPositionIDsReadBack: the record a publish without an id answers is
// the one every reader gets for that event (a group, a follower, a read by
// sequence, the latest by key), sync and async, keyed or not; a lookup by
// its id finds it; and two topics that store an event at the same sequence
// in the same millisecond give them different ids.
func TestPositionIDsReadBack(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{})
	ctx := t.Context()
	const topic = "pos.t"
	var sent []*facade.EventRecord
	for i := range 6 {
		o := facade.PublishOptions{}
		if i%3 == 2 {
			o.Key = "k" + strconv.Itoa(i)
		}
		payload := json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)
		if i%2 == 0 {
			e, err := b.Publish(ctx, topic, payload, o)
			if err != nil {
				t.Fatal(err)
			}
			sent = append(sent, e)
			continue
		}
		f, err := b.PublishAsync(ctx, topic, payload, o)
		if err != nil {
			t.Fatal(err)
		}
		e, err := f.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, e)
	}
	got := make(chan *facade.EventRecord, len(sent))
	unsub, err := b.Subscribe(ctx, topic, "readers", func(_ context.Context, d facade.Delivery) error {
		got <- d.Event()
		return nil
	}, facade.SubscribeOptions{From: facade.FromEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub.Stop(context.WithoutCancel(ctx))
	delivered := map[uint64]*facade.EventRecord{}
	for range sent {
		select {
		case d := <-got:
			delivered[d.Seq] = d
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery")
		}
	}
	for _, e := range sent {
		d := delivered[e.Seq]
		if d == nil {
			t.Fatalf("event %s at %d not delivered", e.ID, e.Seq)
		}
		if d.ID != e.ID || d.TS != e.TS || d.Seq != e.Seq || d.Key != e.Key {
			t.Fatalf("published %s ts %d seq %d key %q; delivered %s ts %d seq %d key %q", e.ID, e.TS, e.Seq, e.Key, d.ID, d.TS, d.Seq, d.Key)
		}
		seq, err := b.SeqOfID(ctx, topic, e.ID)
		if err != nil || seq != e.Seq {
			t.Fatalf("SeqOfID(%s) = %d, %v; want %d", e.ID, seq, err, e.Seq)
		}
		if e.Key != "" {
			m, err := b.LatestByKey(ctx, topic, []string{e.Key})
			if l := m[e.Key]; err != nil || l == nil || l.ID != e.ID || l.TS != e.TS {
				t.Fatalf("latest of %q: %+v, %v; want id %s ts %d", e.Key, m, err, e.ID, e.TS)
			}
		}
	}
	// The same sequence and millisecond in two topics: two ids.
	if a, c := jetstream.PosID("pos.a", 1_700_000_000_000, 7), jetstream.PosID("pos.b", 1_700_000_000_000, 7); a == c {
		t.Fatalf("two topics share the position id %s", a)
	}
}

// TestIDLookupFindsEitherHeader: an event id is found (SeqOfID, as ops
// `id:` positions use it; SetCursor by id; afterId) and read back whichever
// header carries it: Eventhub-Id (hub publishes), Nats-Msg-Id (a plain
// NATS publisher's idempotency key), or both.
func TestIDLookupFindsEitherHeader(t *testing.T) {
	b, nc := newBus(t, jetstream.Config{})
	ctx := t.Context()
	const topic = "hdr.lookup"
	hubMade := pub(t, b, topic, `{"via":"hub"}`, "")
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	plain := func(h nats.Header) uint64 {
		t.Helper()
		ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: topic, Header: h, Data: []byte(`{"via":"nats"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	idMsg, idOwn, idBoth := facade.NewID(), facade.NewID(), facade.NewID()
	const ts = 1_700_000_000_000
	tsOnly := plain(nats.Header{jetstream.HeaderTS: {strconv.Itoa(ts)}})
	cases := []struct {
		name string
		id   string
		seq  uint64
	}{
		{"hub publish", hubMade.ID, hubMade.Seq},
		{"plain Nats-Msg-Id", idMsg, plain(nats.Header{jetstream.HeaderMsgID: {idMsg}})},
		{"plain Eventhub-Id", idOwn, plain(nats.Header{jetstream.HeaderID: {idOwn}})},
		{"both headers", idBoth, plain(nats.Header{jetstream.HeaderID: {idBoth}, jetstream.HeaderMsgID: {idBoth}})},
		{"plain Eventhub-Ts only", jetstream.PosID(topic, ts, tsOnly), tsOnly},
	}
	pub(t, b, topic, `{"after":true}`, "")
	for _, tc := range cases {
		seq, err := b.SeqOfID(ctx, topic, tc.id)
		if err != nil || seq != tc.seq {
			t.Fatalf("%s: SeqOfID(%s) = %d, %v; want %d", tc.name, tc.id, seq, err, tc.seq)
		}
		// The group's cursor moves to the event, and names it by its id.
		if err := b.SetCursor(ctx, topic, "g", facade.CursorPosition{LastID: tc.id}); err != nil {
			t.Fatalf("%s: SetCursor by id: %v", tc.name, err)
		}
		c, err := b.GetCursor(ctx, topic, "g")
		if err != nil {
			t.Fatal(err)
		}
		if c.LastSeq != tc.seq || c.LastID != tc.id {
			t.Fatalf("%s: cursor set to id %s reads seq %d id %q, want seq %d", tc.name, tc.id, c.LastSeq, c.LastID, tc.seq)
		}
	}
	// Eventhub-Id wins over a Nats-Msg-Id that differs (a plain client's
	// dedup key of its own).
	own, other := facade.NewID(), facade.NewID()
	seq := plain(nats.Header{jetstream.HeaderID: {own}, jetstream.HeaderMsgID: {other}})
	if got, err := b.SeqOfID(ctx, topic, own); err != nil || got != seq {
		t.Fatalf("event id %s in Eventhub-Id beside another Nats-Msg-Id: SeqOfID = %d, %v; want %d", own, got, err, seq)
	}
	if _, err := b.SeqOfID(context.WithoutCancel(ctx), topic, other); err == nil {
		t.Fatal("the Nats-Msg-Id of an event whose id is in Eventhub-Id was found as its id")
	}
}

// TestPublishDerivedIsAPositionAndIdempotent: an event the hub derives (a
// dead letter, a redriven dead letter) gets a uuidv7 id, a position, and
// carries its derivation key as Nats-Msg-Id: publishing the same derivation
// again stores nothing and answers with the event as first stored.
func TestPublishDerivedIsAPositionAndIdempotent(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{})
	const topic = "derived.t"
	first, err := b.PublishDerived(t.Context(), topic, json.RawMessage(`{"n":1}`), facade.PublishOptions{}, "key-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := facade.IDTime(first.ID); !ok {
		t.Fatalf("derived id %q is not a uuidv7", first.ID)
	}
	if h := storedHeaders(t, b, topic, first.Seq); h.Get(jetstream.HeaderID) != first.ID || h.Get(jetstream.HeaderMsgID) != "key-1" {
		t.Fatalf("headers %v, want the id in %s and the key in %s", h, jetstream.HeaderID, jetstream.HeaderMsgID)
	}
	again, err := b.PublishDerived(t.Context(), topic, json.RawMessage(`{"n":1}`), facade.PublishOptions{}, "key-1")
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || again.Seq != first.Seq {
		t.Fatalf("repeat answered %s@%d, want the first %s@%d", again.ID, again.Seq, first.ID, first.Seq)
	}
	if n, err := b.Admin().TopicCount(t.Context(), topic); err != nil || n != 1 {
		t.Fatalf("%d events stored (%v), want 1", n, err)
	}
}
