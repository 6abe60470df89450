package jetstream_test

import (
	"context"
	"encoding/json"
	"testing"

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

// TestPublishIDHeaders: on a single-replica stream, an id the hub makes
// travels in Eventhub-Id only (nothing can send it twice), while an id the
// caller supplies travels in Nats-Msg-Id too, so that a repeat of it, sync
// or async, is stored once and answered with the stored event.
func TestPublishIDHeaders(t *testing.T) {
	b, _ := newBus(t, jetstream.Config{})
	ctx := t.Context()
	const topic = "hdr.t"

	e := pub(t, b, topic, `{"n":1}`, "")
	h := storedHeaders(t, b, topic, e.Seq)
	if h.Get(jetstream.HeaderID) != e.ID || h.Get(jetstream.HeaderMsgID) != "" {
		t.Fatalf("sync publish, hub-made id %s: headers %v, want the id in %s only", e.ID, h, jetstream.HeaderID)
	}
	f, err := b.PublishAsync(ctx, topic, json.RawMessage(`{"n":2}`), facade.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ea, err := f.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h = storedHeaders(t, b, topic, ea.Seq)
	if h.Get(jetstream.HeaderID) != ea.ID || h.Get(jetstream.HeaderMsgID) != "" {
		t.Fatalf("async publish, hub-made id %s: headers %v, want the id in %s only", ea.ID, h, jetstream.HeaderID)
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
	if info.State.Msgs != 4 {
		t.Fatalf("%d messages stored, want 4 (each repeat stored once)", info.State.Msgs)
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
	cases := []struct {
		name string
		id   string
		seq  uint64
	}{
		{"hub publish", hubMade.ID, hubMade.Seq},
		{"plain Nats-Msg-Id", idMsg, plain(nats.Header{jetstream.HeaderMsgID: {idMsg}})},
		{"plain Eventhub-Id", idOwn, plain(nats.Header{jetstream.HeaderID: {idOwn}})},
		{"both headers", idBoth, plain(nats.Header{jetstream.HeaderID: {idBoth}, jetstream.HeaderMsgID: {idBoth}})},
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
