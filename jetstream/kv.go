package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

var _ facade.KeyDeleter = (*Bus)(nil)

// HeaderOperation marks a tombstone, the message that deletes a key: "DEL",
// or "PURGE" when the key's earlier messages were purged too. The names
// are those of NATS key-value buckets, so tools that know them read a
// keyed topic's tombstones the same way. A tombstone has no data.
const HeaderOperation = "KV-Operation"

// Values of HeaderOperation.
const (
	opDelete = "DEL"
	opPurge  = "PURGE"
)

// HeaderMarkerReason marks the message JetStream writes in place of a
// key's newest message when that expires (its TTL or the stream's max age),
// on streams with subject delete markers: "MaxAge", or "Remove" / "Purge"
// (nats-server JSMarkerReason). Such a marker deletes the key as a
// tombstone does.
const HeaderMarkerReason = "Nats-Marker-Reason"

// isTombstone reports whether a message's headers mark it as a tombstone:
// the hub's (or a NATS key-value bucket's) delete or purge, or JetStream's
// subject delete marker.
func isTombstone(h nats.Header) bool {
	op := h.Get(HeaderOperation)
	return op == opDelete || op == opPurge || h.Get(HeaderMarkerReason) != ""
}

// DeleteKey implements [facade.KeyDeleter]. The tombstone is a message on
// the key's subject with HeaderOperation and no data, published like an
// event (with opts.ExpectedLastSeq as Nats-Expected-Last-Subject-Sequence);
// with opts.Purge the key's messages before it are then purged from the
// stream ([Admin.Purge] of the key up to the tombstone's sequence), so that
// only the tombstone is left. A purge that fails after the tombstone
// was stored returns its error: deleting again with Purge finishes it.
func (b *Bus) DeleteKey(ctx context.Context, topic, key string, opts facade.DeleteOptions) (*facade.EventRecord, error) {
	if b.isClosed() {
		return nil, facade.ErrClosed
	}
	if key == "" {
		return nil, fmt.Errorf("%w: a delete needs a key", facade.ErrBadKey)
	}
	if err := facade.ValidateKey(key); err != nil {
		return nil, err
	}
	if err := b.waitConnected(ctx); err != nil {
		return nil, err
	}
	ti, err := b.existingTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	if !ti.keyed {
		return nil, fmt.Errorf("%w: stream %s does not capture keyed subjects of %s", facade.ErrBadKey, ti.name, topic)
	}
	e := &facade.EventRecord{
		ID: facade.NewID(), TS: time.Now().UnixMilli(), Topic: topic, Key: key,
		Payload: json.RawMessage("null"), Deleted: true,
	}
	subject := subjectFor(topic, key)
	msg, err := toMsg(subject, e, replicated(ti))
	if err != nil {
		return nil, err
	}
	msg.Data = nil
	op := opDelete
	if opts.Purge {
		op = opPurge
	}
	msg.Header[HeaderOperation] = []string{op}
	if opts.ExpectedLastSeq != nil {
		msg.Header[jetstream.ExpectedLastSubjSeqHeader] = []string{strconv.FormatUint(*opts.ExpectedLastSeq, 10)}
	}
	ack, err := b.publishMsg(ctx, ti, msg)
	if err != nil {
		return nil, fmt.Errorf("delete %s key %q: %w", topic, key, translate(err))
	}
	e.Seq = ack.Sequence
	ti.obs.Published()
	if opts.Purge && ack.Sequence > 1 { // (Purge up to 0 would take the tombstone too)
		if _, err := b.Admin().Purge(ctx, topic, key, ack.Sequence-1); err != nil {
			return nil, fmt.Errorf("purge %s key %q: %w", topic, key, err)
		}
	}
	return e, nil
}
