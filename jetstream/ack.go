package jetstream

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/hashid"
)

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
	s.b.released.forget(d.key)
}

// deadLetterID derives the dead-letter event's id from the event and the
// group, so that a retried dead-letter publish is deduplicated and two groups
// dead-lettering the same event get two records. It is a UUID version 8.
func deadLetterID(id, group string) string { return hashid.V8(id, group) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
