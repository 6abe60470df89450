package wire

// LiveOptions are the opts of a live SUBSCRIBE.
type LiveOptions struct {
	// Since, when set, recovers the events stored after this position
	// before the live ones.
	Since *LivePosition `json:"since,omitempty"`
	// Snapshot sends the newest event of every key of the (keyed) topic
	// first, then the events stored after it.
	Snapshot bool `json:"snapshot,omitempty"`
	// KeyPrefix, when set, makes the subscription a watch: only keyed
	// events whose key begins with it ("": every keyed event), in the
	// snapshot, the recovery and the live events.
	KeyPrefix *string `json:"key_prefix,omitempty"`
}

// LivePosition is a position in a topic's stream: the seq of an event (as
// every EVENT carries it) or its id.
type LivePosition struct {
	Seq uint64 `json:"seq,omitempty"`
	ID  string `json:"id,omitempty"`
}
