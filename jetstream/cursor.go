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
	cons, err := ti.stream.Consumer(ctx, name)
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
		err = resetGroup(ctx, ti.stream, cons.CachedInfo(), next)
	}
	if err != nil {
		return fmt.Errorf("set cursor of %s/%s to %d: %w", topic, group, next, translate(err))
	}
	return nil
}

// resetGroup moves the consumer before (its info before the move) to start
// at stream sequence next, and checks the consumer's answer. nats-server
// (2.15) sometimes answers a reset with the consumer exactly where it was,
// its ack floor and delivered sequences unchanged though its pending count
// is recomputed; seen about once in 300 resets to the first event made
// right after the group's member stopped, and the position then stays
// wrong. A second reset has always taken, so an answer unchanged from
// before (and not already the position asked for) is reset again, a few
// times.
func resetGroup(ctx context.Context, s jetstream.Stream, before *jetstream.ConsumerInfo, next uint64) error {
	at := func(ci *jetstream.ConsumerInfo) bool {
		return ci.AckFloor.Stream == next-1 && ci.AckFloor.Consumer == 0
	}
	for attempt := 1; ; attempt++ {
		r, err := s.ResetConsumerToSequence(ctx, before.Name, next)
		if err != nil {
			return err
		}
		ci := r.ConsumerInfo
		unmoved := ci != nil && !at(ci) &&
			ci.AckFloor.Stream == before.AckFloor.Stream && ci.AckFloor.Consumer == before.AckFloor.Consumer &&
			ci.Delivered.Stream == before.Delivered.Stream && ci.Delivered.Consumer == before.Delivered.Consumer
		if !unmoved {
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
