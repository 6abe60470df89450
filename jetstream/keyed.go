package jetstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

// LatestByKey implements [facade.KeyReader] with one direct get per key: the
// newest message on the key's subject, read from the stream's per-subject
// index, never by scanning. ErrNotFound when the topic has no stream.
func (b *Bus) LatestByKey(ctx context.Context, topic string, keys []string) (map[string]*facade.EventRecord, error) {
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	ti, err := b.existingTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*facade.EventRecord, len(keys))
	for _, k := range keys {
		if err := facade.ValidateKey(k); err != nil {
			return nil, err
		}
		raw, err := ti.stream.GetLastMsgForSubject(ctx, subjectFor(topic, k))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("latest of %s key %q: %w", topic, k, translate(err))
		}
		out[k] = fromMsg(raw.Subject, raw.Header, raw.Data, raw.Sequence, raw.Time)
	}
	return out, nil
}
