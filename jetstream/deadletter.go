package jetstream

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/hashid"
)

// deadLetter copies d's event to the topic's dead-letter topic, then
// terminates it in the group. The copy runs on a goroutine of the bus, so a
// dead-letter topic that does not answer never stalls the member's pull
// loop; at most maxDeadLettersInFlight copies run at once. An event that
// finds no room, or whose copy fails, is handed back, so it is never lost:
// the next delivery tries again.
func (s *subscription) deadLetter(d *delivery, reason string) {
	b := s.b
	select {
	case b.deadLetters <- struct{}{}:
	default:
		b.log.Warn("dead-letter copies at their limit; event handed back", "topic", d.rec.Topic, "group", s.group,
			"id", d.rec.ID, "in_flight", maxDeadLettersInFlight)
		d.endSpan("handed_back")
		_ = d.msg.NakWithDelay(b.cfg.MaxRetryBackoff)
		return
	}
	if !b.goCopy(func() { s.copyToDeadLetters(d, reason) }) {
		d.endSpan("handed_back")
		_ = d.msg.Nak() // closing: the next delivery tries again
	}
}

// goCopy runs copy on a goroutine of the bus's, holding the dead-letter
// slot the caller took (given back when copy returns); false, with the
// slot given back, when the bus is closing.
func (b *Bus) goCopy(copy func()) bool {
	b.subsMu.Lock()
	if b.closed {
		b.subsMu.Unlock()
		<-b.deadLetters
		return false
	}
	b.wg.Add(1)
	b.subsMu.Unlock()
	go func() {
		defer b.wg.Done()
		defer func() { <-b.deadLetters }()
		copy()
	}()
	return true
}

// copyToDeadLetters publishes d's dead letter and terminates d, or hands
// it back when the publish fails.
func (s *subscription) copyToDeadLetters(d *delivery, reason string) {
	e := d.rec
	ctx, cancel := context.WithTimeout(d.handlerContext(s.b.copying), s.b.cfg.RequestTimeout)
	defer cancel()
	if err := s.b.publishDeadLetter(ctx, e, s.group, min(d.attempt, s.opts.MaxAttempts), reason); err != nil {
		s.b.log.Error("dead-letter publish failed; event handed back", "topic", e.Topic, "group", s.group, "id", e.ID, "err", err)
		d.endSpan("handed_back")
		_ = d.msg.NakWithDelay(s.b.cfg.MaxRetryBackoff)
		return
	}
	d.endSpan("dead_letter", keyReason.String(truncate(reason, 512)), keyDeadLetterTo.String(facade.DeadLetterTopic(e.Topic)))
	s.obs.DeadLettered()
	s.b.log.Warn("event dead-lettered", "topic", e.Topic, "group", s.group, "id", e.ID, "attempts", d.attempt, "reason", truncate(reason, 512))
	// The reason tells the bus's watch of terminations that this one is
	// dead-lettered already.
	if err := d.msg.TermWithReason(termReason); err != nil {
		s.b.log.Warn("term", "topic", e.Topic, "group", s.group, "id", e.ID, "err", err)
		return
	}
	s.b.released.forget(d.key)
	if s.order != nil {
		s.order.done(d)
	}
}

// publishDeadLetter publishes the dead letter of e, an event of group,
// after attempts deliveries.
func (b *Bus) publishDeadLetter(ctx context.Context, e *facade.EventRecord, group string, attempts int, reason string) error {
	h := make(map[string]string, len(e.Headers)+6)
	for k, v := range e.Headers {
		h[k] = v
	}
	h["dlq_topic"] = e.Topic
	h["dlq_group"] = group
	h["dlq_id"] = e.ID
	h["dlq_seq"] = strconv.FormatUint(e.Seq, 10)
	h["dlq_attempts"] = strconv.Itoa(attempts)
	h["dlq_reason"] = truncate(reason, 512)
	_, err := b.PublishDerived(ctx, facade.DeadLetterTopic(e.Topic), json.RawMessage(e.Payload), facade.PublishOptions{
		Key:       e.Key,
		Partition: e.Partition,
		Headers:   h,
		Tags:      e.Tags,
		CausedBy:  []string{e.ID},
		SID:       e.SID,
	}, deadLetterKey(e.ID, group))
	return err
}

// deadLetterKey derives the dead letter's Nats-Msg-Id from the event and the
// group, so that a retried dead-letter publish is deduplicated and two groups
// dead-lettering the same event get two records. The dead letter's id is a
// fresh uuidv7 (a position in the dead-letter topic), not this key.
func deadLetterKey(id, group string) string { return hashid.V8(id, group) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
