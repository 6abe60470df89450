package jetstream

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// FuzzReleased runs a sequence of deliveries, uncounted hand-backs and
// settlements over a few events and checks every attempt number against
// a model: the store's delivery count less the hand-backs since the event
// was last settled, never below 1.
func FuzzReleased(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 5, 4, 1, 9})
	f.Add([]byte{3, 3, 3, 7, 3, 11})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var r released
		delivered := map[uint64]uint64{} // the store's NumDelivered
		uncounted := map[uint64]int{}    // the model
		for _, op := range ops {
			seq := uint64(op>>2) % 4
			meta := &jetstream.MsgMetadata{Stream: "s", Consumer: "c", Sequence: jetstream.SequencePair{Stream: seq}}
			switch op & 3 {
			case 0, 1: // a delivery; every other one handed back uncounted
				delivered[seq]++
				meta.NumDelivered = delivered[seq]
				want := int(delivered[seq]) - uncounted[seq]
				if got := r.attempt(meta); got != want || got < 1 {
					t.Fatalf("delivery %d of %d: attempt %d, want %d", delivered[seq], seq, got, want)
				}
				if op&3 == 1 {
					r.add(keyOf(meta))
					uncounted[seq]++
				}
			case 2: // settled: the store forgets it too
				r.forget(keyOf(meta))
				delete(delivered, seq)
				delete(uncounted, seq)
			case 3: // another consumer's event of the same sequence
				meta.Consumer = "other"
				meta.NumDelivered = 2
				if got := r.attempt(meta); got != 2 {
					t.Fatalf("another consumer's delivery: attempt %d, want 2", got)
				}
			}
		}
	})
}
