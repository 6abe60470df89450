package facade

import "context"

// Follower is the optional capability of live subscriptions (no group, no
// acks, no cursor kept by the hub): following a topic from a stream
// position.
type Follower interface {
	// Follow hands fn every event of topic stored after stream position
	// after ([AfterNow]: after the last event stored when Follow is
	// called; 0: from the beginning), in
	// stream order, one at a time on one goroutine, until the subscription
	// is stopped or the bus closes. It returns once following has started,
	// so an event published after it returns is delivered. The topic's
	// stream is created if needed.
	Follow(ctx context.Context, topic string, after uint64, fn func(*EventRecord)) (Subscription, error)
}

// LiveReader is a [Follower] that can also read what a topic holds after a
// position, to recover what a client missed: what a gateway needs to serve
// live subscriptions.
type LiveReader interface {
	Follower
	// ReadAfter hands fn the events of topic stored after stream position
	// after, in order, up to limit of them, and stops at the end of the
	// stream as it is while it reads. An error from fn stops the read and
	// is returned.
	ReadAfter(ctx context.Context, topic string, after uint64, limit int, fn func(*EventRecord) error) (ReadResult, error)
}

// AfterNow is the position of [LiveReader.Follow] that means "what is
// stored from now on".
const AfterNow = ^uint64(0)

// ReadResult is what [LiveReader.ReadAfter] found.
type ReadResult struct {
	// Read is how many events were handed to fn.
	Read int
	// More: the read stopped at its limit, and more events follow.
	More bool
	// Complete: the stream still holds the position after+1, so nothing
	// after it was removed by retention limits (on a compacted topic an
	// event may still have been replaced by a newer one of its key).
	Complete bool
	// First is the oldest stream position the topic's stream still holds.
	First uint64
	// Last is the stream's last position when the read started.
	Last uint64
}
