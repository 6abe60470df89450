package jetstream

import (
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// released remembers the deliveries of each pending event that were handed
// back without having reached anyone: events a stopping member had
// buffered but not handled, and events a WebSocket session queued but never
// wrote before its connection went. JetStream counts every delivery;
// the bus subtracts these, so that a dropped connection does not spend the
// attempts (and dead-letter the events) of events its client never saw.
//
// It is per bus (per hub): a redelivery that reaches another hub counts
// them. It holds at most maxReleased events, forgetting the oldest.
type released struct {
	mu    sync.Mutex
	n     map[releaseKey]int
	order []releaseKey
}

// releaseKey names one pending event of one group.
type releaseKey struct {
	stream, consumer string
	seq              uint64
}

const maxReleased = 100_000

func keyOf(meta *jetstream.MsgMetadata) releaseKey {
	return releaseKey{meta.Stream, meta.Consumer, meta.Sequence.Stream}
}

// add records one uncounted delivery of k.
func (r *released) add(k releaseKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = make(map[releaseKey]int)
	}
	if _, ok := r.n[k]; !ok {
		r.order = append(r.order, k)
		for len(r.order) > maxReleased {
			delete(r.n, r.order[0])
			r.order = r.order[1:]
		}
	}
	r.n[k]++
}

// attempt is the attempt number of the delivery meta describes: the
// store's delivery count less the deliveries of it handed back uncounted.
func (r *released) attempt(meta *jetstream.MsgMetadata) int {
	n := int(meta.NumDelivered)
	if n <= 1 {
		return n
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return n - r.n[keyOf(meta)]
}

// forget drops k once its event is settled (acknowledged or terminated).
func (r *released) forget(k releaseKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.n) > 0 { // most acks: nothing to hash
		delete(r.n, k) // its place in order goes when it comes up
	}
}
