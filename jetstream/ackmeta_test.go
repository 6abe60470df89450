package jetstream

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ackMeta reads what nats.go's Metadata reads, from both layouts of the
// ack subject, and refuses what it refuses.
func FuzzAckMeta(f *testing.F) {
	for _, s := range []string{
		"$JS.ACK.EH_t.g.1.42.40.1764240000000000000.7",
		"$JS.ACK.dom.ACCHASH.EH_t.g.3.42.40.1764240000000000000.0.rnd",
		"$JS.ACK._.ACCHASH.EH_t.g.3.42.40.1764240000000000000.0",
		"$JS.ACK.EH_t.g.1.42.40.x.7",
		"$JS.ACK.a.b.c",
		"$JS.ACK.a.b.c.d.e.f.g.h",
		"$JS.NAK.EH_t.g.1.42.40.1.7",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reply string) {
		var got jetstream.MsgMetadata
		ok := ackMeta(reply, &got)
		want, err := refMeta(reply)
		if ok != (err == nil) {
			t.Fatalf("%q: ackMeta ok %v, Metadata err %v", reply, ok, err)
		}
		if ok && got != *want {
			t.Fatalf("%q: ackMeta %+v, Metadata %+v", reply, got, *want)
		}
	})
}

// refMeta is nats.go's reading of reply.
func refMeta(reply string) (*jetstream.MsgMetadata, error) {
	m, err := (&nats.Msg{Reply: reply, Sub: &nats.Subscription{}}).Metadata()
	if err != nil {
		return nil, err
	}
	r := &jetstream.MsgMetadata{
		NumDelivered: m.NumDelivered, NumPending: m.NumPending, Timestamp: m.Timestamp,
		Stream: m.Stream, Consumer: m.Consumer, Domain: m.Domain,
	}
	r.Sequence.Stream, r.Sequence.Consumer = m.Sequence.Stream, m.Sequence.Consumer
	return r, nil
}
