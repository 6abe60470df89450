package jetstream

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
)

// termReason is the reason the bus gives when it terminates an event it
// has dead-lettered itself.
const termReason = "eventhub: dead-lettered"

// terminatedAdvisories is where JetStream announces every message that a
// member of a consumer terminated (+TERM).
const terminatedAdvisories = "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.>"

// terminatedQueue is the queue group in which the hubs take those
// advisories.
const terminatedQueue = "eventhub-terminated"

// terminatedAdvisory is JetStream's advisory of a terminated message
// (io.nats.jetstream.advisory.v1.terminated).
type terminatedAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
	Reason     string `json:"reason"`
}

// watchTerminations dead-letters the events that members of the hub's
// groups terminate themselves: a native member's +TERM (the bus's own
// members never terminate an event but after its dead letter), which
// JetStream would drop silently. The dead letter's reason says who ended
// it: "terminated by a member", and the member's reason if it gave one.
// Events of consumers the hub did not make are left alone. The hubs that
// share a cluster take the advisories as one queue group, so each
// terminated event is dead-lettered by one of them.
func (b *Bus) watchTerminations() (*nats.Subscription, error) {
	sub, err := b.nc.QueueSubscribe(terminatedAdvisories, terminatedQueue, b.onTerminated)
	if err != nil {
		return nil, fmt.Errorf("jetstream: watch terminated events: %w", err)
	}
	return sub, nil
}

func (b *Bus) onTerminated(m *nats.Msg) {
	var a terminatedAdvisory
	if err := json.Unmarshal(m.Data, &a); err != nil || a.Reason == termReason || a.Stream == "" || a.Consumer == "" {
		return
	}
	// JetStream has ended the event already: wait for room rather than
	// lose its dead letter (advisories wait in the subscription meanwhile).
	select {
	case b.deadLetters <- struct{}{}:
	case <-b.copying.Done():
		return
	}
	b.goCopy(func() {
		if err := b.deadLetterTerminated(a); err != nil {
			b.log.Error("an event a member terminated could not be dead-lettered", "stream", a.Stream, "consumer", a.Consumer, "seq", a.StreamSeq, "err", err)
		}
	})
}

// deadLetterTerminated publishes the dead letter of the event a member of
// a hub group terminated.
func (b *Bus) deadLetterTerminated(a terminatedAdvisory) error {
	ctx, cancel := context.WithTimeout(b.copying, b.cfg.RequestTimeout)
	defer cancel()
	cons, err := b.js.Consumer(ctx, a.Stream, a.Consumer)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	ci := cons.CachedInfo()
	topic, ok := ci.Config.Metadata[metaTopic]
	if !ok {
		return nil // not a group the hub made
	}
	group := cmp.Or(ci.Config.Metadata[metaGroup], ci.Name)
	st, err := b.js.Stream(ctx, a.Stream)
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	raw, err := st.GetMsg(ctx, a.StreamSeq)
	if err != nil {
		return fmt.Errorf("event %d: %w", a.StreamSeq, err)
	}
	e := fromMsg(raw.Subject, raw.Header, raw.Data, raw.Sequence, raw.Time)
	reason := "terminated by a member"
	if a.Reason != "" {
		reason += ": " + a.Reason
	}
	if err := b.publishDeadLetter(ctx, e, group, int(a.Deliveries), reason); err != nil {
		return err
	}
	b.cfg.Observer.Group(topic, group).DeadLettered()
	b.log.Warn("event dead-lettered", "topic", e.Topic, "group", group, "id", e.ID, "attempts", a.Deliveries, "reason", truncate(reason, 512))
	return nil
}
