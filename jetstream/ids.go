package jetstream

import (
	"time"

	"github.com/eventhub/eventhub/internal/hashid"
)

// Events stored without a Nats-Msg-Id (published by a plain NATS client) get a
// stable id derived from where they are stored: a uuidv7 whose timestamp is the
// stored time and whose 12-bit rand_a field is synthMarker, with the stream
// sequence in the 62-bit rand_b field. The same message always gets the same
// id, and the id leads straight back to its sequence.
const synthMarker = 0xE4B

func synthID(stored time.Time, seq uint64) string {
	return hashid.V7Seq(stored.UnixMilli(), synthMarker, seq)
}

// synthSeq returns the sequence a synthesised id points at.
func synthSeq(id string) (uint64, bool) { return hashid.SeqOfV7(id, synthMarker) }

// Events stored with a time (HeaderTS) but no id, which is how the hub
// publishes an event whose id it makes when nothing can send it twice, get
// the position id PosID: a uuidv7 whose timestamp is the event's ts, whose
// rand_a field starts with the 4 bits posMarker, followed by a 30-bit
// FNV-1a hash of the topic and the low 40 bits of the stream sequence. The
// publisher derives it from the store's acknowledgement, every reader from
// the message: both get the same id. The topic hash keeps the ids of two
// topics apart that store events with the same sequence in the same
// millisecond.
const posMarker = 0xC

// PosID is the id of the event of topic stored at stream sequence seq with
// time ts (epoch milliseconds) and no id header: what the hub answers a
// publish that carries only HeaderTS with, and what every reader derives
// for such a message. A plain NATS consumer that reads a message without
// Eventhub-Id (see docs/nats.md, Interoperability) gets its event id from
// PosID(topic, Eventhub-Ts, stream sequence), topic being the subject
// without its key.
func PosID(topic string, ts int64, seq uint64) string {
	return hashid.V7Pos(ts, posMarker, hashid.Tag30(topic), seq)
}

// posSeq returns the sequence a position id points at (its low 40 bits:
// for a stream past 2^40 events, the lookup checks and falls back to a
// search).
func posSeq(id string) (uint64, bool) {
	_, seq, ok := hashid.PosOfV7(id, posMarker)
	return seq, ok && seq > 0
}
