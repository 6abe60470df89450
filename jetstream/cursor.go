package jetstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

// GetCursor implements [facade.Cursors]. The cursor is the group's ack floor
// on the server: acknowledgements out of order never move it past an
// unacknowledged event. The group is found as [Admin.Groups] finds it.
func (b *Bus) GetCursor(ctx context.Context, topic, group string) (*facade.CursorPosition, error) {
	if err := facade.ValidateGroup(group); err != nil {
		return nil, err
	}
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, err := b.groupTopic(ctx, topic, false)
	if err != nil {
		return nil, err
	}
	info, err := b.findGroup(ctx, ti, group)
	if err != nil {
		return nil, err
	}
	c := b.cursorOf(ctx, ti, info.AckFloor.Stream)
	c.Pending = info.NumPending + uint64(info.NumAckPending)
	return &c, nil
}

// cursorOf describes stream position seq of a topic.
func (b *Bus) cursorOf(ctx context.Context, ti *topicInfo, seq uint64) facade.CursorPosition {
	c := facade.CursorPosition{Topic: ti.topic, LastSeq: seq}
	if seq == 0 {
		return c
	}
	raw, err := ti.stream.GetMsg(ctx, seq)
	if err != nil {
		return c // deleted or aged out: the position stands without an id
	}
	e := fromMsg(raw.Subject, raw.Header, raw.Data, raw.Sequence, raw.Time)
	c.LastID, c.LastTS = e.ID, e.TS
	return c
}

// SetCursor implements [facade.Cursors] with a consumer reset: the group
// keeps its configuration and its name. A group that does not exist is
// created there (and the topic's stream with it), counted against the
// quotas of the principal ctx carries (Config.Guard). Deliveries in flight
// when the cursor moves may still be acknowledged by their members.
func (b *Bus) SetCursor(ctx context.Context, topic, group string, c facade.CursorPosition) error {
	if err := facade.ValidateGroup(group); err != nil {
		return err
	}
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, err := b.groupTopic(ctx, topic, true)
	if err != nil {
		return err
	}
	var next uint64
	switch {
	case c.LastSeq > 0:
		next = c.LastSeq + 1
	case c.LastID != "":
		seq, err := b.resolveID(ctx, ti, c.LastID)
		if err != nil {
			return err
		}
		next = seq + 1
	case c.LastTS > 0:
		next, err = b.seqAtTime(ctx, ti, timeMs(c.LastTS))
		if err != nil {
			return err
		}
	default:
		next = 1
	}
	name := consumerNameFor(group, topic, ti.shared)
	// A reset request for a consumer that does not exist goes unanswered
	// until it times out, so look first.
	_, err = ti.stream.Consumer(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		var undo func()
		if undo, err = b.guardGroup(ctx, ti, group); err != nil {
			return err
		}
		var created bool
		if _, created, err = b.createGroup(ctx, ti, name, group, facade.SubscribeOptions{}.WithDefaults(), next); !created {
			undo() // failed, or another member made it first
		}
	case err == nil:
		err = resetGroup(ctx, ti.stream, name, next)
	}
	if err != nil {
		return fmt.Errorf("set cursor of %s/%s to %d: %w", topic, group, next, translate(err))
	}
	return nil
}

// resetGroup moves consumer name of stream s to start at stream sequence
// next, and checks the consumer's answer. nats-server (2.15, file storage)
// keeps a consumer's state in memory and writes it to disk behind; a reset
// to the stream's first sequence leaves that state all zero, which the
// store takes for "not read from disk yet", so it reads the file. When the
// reset's own write of the file was skipped because a write of the earlier
// state was still under way (as in the moments after a group's last
// acks), the file holds a position from before the reset, and the
// consumer reports it and keeps it (its pending count alone is
// recomputed): a rewound group's cursor would show events acknowledged
// that are coming again. A reset that took answers at exactly the position
// asked for, unless something was delivered or acknowledged since, which
// its answer then timestamps; an answer elsewhere without those times is
// the earlier state, and the consumer is reset again, a few times.
func resetGroup(ctx context.Context, s jetstream.Stream, name string, next uint64) error {
	stale := func(q jetstream.SequenceInfo) bool {
		return q.Last == nil && (q.Consumer != 0 || q.Stream != next-1)
	}
	for attempt := 1; ; attempt++ {
		r, err := s.ResetConsumerToSequence(ctx, name, next)
		if err != nil {
			return err
		}
		ci := r.ConsumerInfo
		if ci == nil || !stale(ci.AckFloor) && !stale(ci.Delivered) {
			return nil
		}
		if attempt == 5 {
			return fmt.Errorf("%w: the group stayed at %d after %d resets", facade.ErrUnavailable, ci.AckFloor.Stream, attempt)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
		}
	}
}
