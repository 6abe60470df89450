package jetstream

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/eventhub/eventhub/facade"
)

// Ack implements [facade.Acker]: it acknowledges an event delivered to a
// ManualAck subscription of this bus.
func (b *Bus) Ack(ctx context.Context, topic, group, id string) (facade.Ack, error) {
	s, d, err := b.inflight(topic, group, id)
	if err != nil {
		return facade.Ack{ID: id, Err: err.Error()}, err
	}
	if err := s.ack(d); err != nil {
		return facade.Ack{ID: id, Err: err.Error()}, err
	}
	return facade.Ack{ID: id, OK: true}, nil
}

// Nack implements [facade.Acker]: the event is redelivered after the retry
// backoff, or dead-lettered when this was its last attempt.
func (b *Bus) Nack(ctx context.Context, topic, group, id, reason string) (facade.Ack, error) {
	s, d, err := b.inflight(topic, group, id)
	if err != nil {
		return facade.Ack{ID: id, Err: err.Error()}, err
	}
	if reason == "" {
		reason = "nacked"
	}
	s.fail(d, reason)
	return facade.Ack{ID: id, OK: true, Err: reason}, nil
}

// Release hands an event delivered to a ManualAck subscription of this bus
// back to its group without counting the delivery as an attempt: for
// events that never reached the consumer (the gateway releases those it had
// queued but not written when a connection drops). It is redelivered at
// after the retry backoff (as a NACK would be, so that a member that is
// stopping does not get it back), with the same attempt number, to this or
// another member.
func (b *Bus) Release(ctx context.Context, topic, group, id string) error {
	s, d, err := b.inflight(topic, group, id)
	if err != nil {
		return err
	}
	b.released.add(d.key)
	if err := d.msg.NakWithDelay(b.cfg.RetryBackoff); err != nil {
		return fmt.Errorf("release %s: %w", id, translate(err))
	}
	s.floor.drop(d.rec.Seq)
	return nil
}

// inflight finds and takes the delivery of id among this bus's members of
// group.
func (b *Bus) inflight(topic, group, id string) (*subscription, *delivery, error) {
	b.subsMu.RLock()
	defer b.subsMu.RUnlock()
	subs := b.subs[groupKey{topic, group}]
	if len(subs) == 0 {
		return nil, nil, fmt.Errorf("%w: %s/%s", facade.ErrNotSubscribed, topic, group)
	}
	for _, s := range subs {
		if d := s.takeID(id); d != nil {
			return s, d, nil
		}
	}
	return nil, nil, fmt.Errorf("%w: %s is not in flight for %s/%s", facade.ErrUnknownID, id, topic, group)
}

// deadLetter copies d's event to the topic's dead-letter topic, then
// terminates it in the group. If the copy fails the event is handed back, so
// it is never lost: the next delivery tries again.
func (s *subscription) deadLetter(d *delivery, reason string) {
	e := d.rec
	h := make(map[string]string, len(e.Headers)+6)
	for k, v := range e.Headers {
		h[k] = v
	}
	h["dlq_topic"] = e.Topic
	h["dlq_group"] = s.group
	h["dlq_id"] = e.ID
	h["dlq_seq"] = strconv.FormatUint(e.Seq, 10)
	h["dlq_attempts"] = strconv.Itoa(min(d.attempt, s.opts.MaxAttempts))
	h["dlq_reason"] = truncate(reason, 512)
	ctx, cancel := s.b.withTimeout(context.Background())
	defer cancel()
	_, err := s.b.Publish(ctx, facade.DeadLetterTopic(e.Topic), json.RawMessage(e.Payload), facade.PublishOptions{
		ID:        deadLetterID(e.ID, s.group),
		Key:       e.Key,
		Partition: e.Partition,
		Headers:   h,
		Tags:      e.Tags,
		CausedBy:  []string{e.ID},
		SID:       e.SID,
	})
	if err != nil {
		s.b.log.Error("dead-letter publish failed; event handed back", "topic", e.Topic, "group", s.group, "id", e.ID, "err", err)
		_ = d.msg.NakWithDelay(s.b.cfg.MaxRetryBackoff)
		return
	}
	s.obs.DeadLettered()
	s.b.log.Warn("event dead-lettered", "topic", e.Topic, "group", s.group, "id", e.ID, "attempts", d.attempt, "reason", h["dlq_reason"])
	if err := d.msg.Term(); err != nil {
		s.b.log.Warn("term", "topic", e.Topic, "group", s.group, "id", e.ID, "err", err)
		return
	}
	s.floor.ack(e.Seq)
	s.b.released.forget(d.key)
}

// deadLetterID derives the dead-letter event's id from the event and the
// group, so that a retried dead-letter publish is deduplicated and two groups
// dead-lettering the same event get two records. It is a UUID version 8.
func deadLetterID(id, group string) string {
	sum := sha256.Sum256([]byte(id + "\x00" + group))
	var u uuid.UUID
	copy(u[:], sum[:16])
	u[6] = u[6]&0x0f | 0x80
	u[8] = u[8]&0x3f | 0x80
	return u.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// Extend implements [facade.Extender]: a NAK with a delay keeps the event
// pending and sets its redelivery time to exactly now + by, and a later ACK
// still counts. It is sent to the reply subject directly, because nats.go
// would mark the message as acknowledged after NakWithDelay.
func (b *Bus) Extend(ctx context.Context, topic, group, id string, by time.Duration) error {
	if by <= 0 {
		return fmt.Errorf("%w: extension must be positive", facade.ErrInvalidOption)
	}
	b.subsMu.RLock()
	defer b.subsMu.RUnlock()
	subs := b.subs[groupKey{topic, group}]
	if len(subs) == 0 {
		return fmt.Errorf("%w: %s/%s", facade.ErrNotSubscribed, topic, group)
	}
	for _, s := range subs {
		s.mu.Lock()
		d, ok := s.inflight[id]
		if ok {
			d.deadline = time.Now().Add(by)
		}
		s.mu.Unlock()
		if !ok {
			continue
		}
		body := fmt.Appendf(nil, `-NAK {"delay": %d}`, by.Nanoseconds())
		if err := b.nc.Publish(d.msg.Reply(), body); err != nil {
			return fmt.Errorf("extend %s: %w", id, translate(err))
		}
		return nil
	}
	return fmt.Errorf("%w: %s is not in flight for %s/%s", facade.ErrUnknownID, id, topic, group)
}
