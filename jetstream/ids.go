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
