package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/gateway"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// Publish implements [facade.Publisher]: it sends PUBLISH and waits for the
// gateway's OK, which carries the new event's id. Errors carry the gateway's
// code (errors.Is with the facade sentinels works: ErrBadTopic,
// ErrBadPayload, ...); a dropped connection wraps facade.ErrUnavailable (the
// event may or may not be stored: publish again with the same opts.ID to be
// sure it is stored once).
func (c *Client) Publish(ctx context.Context, topic string, payload json.RawMessage, opts facade.PublishOptions) (*facade.EventRecord, error) {
	if len(payload) == 0 {
		return nil, fmt.Errorf("%w: empty payload (use null for none)", facade.ErrBadPayload)
	}
	if !json.Valid(payload) {
		return nil, fmt.Errorf("%w: payload is not valid JSON", facade.ErrBadPayload)
	}
	f := &gateway.Frame{Op: gateway.OpPublish, Topic: topic, Payload: payload}
	if b, err := json.Marshal(opts); err != nil {
		return nil, fmt.Errorf("%w: opts: %w", facade.ErrInvalidOption, err)
	} else if string(b) != "{}" {
		f.Opts = b
	}
	r, err := c.call(ctx, f)
	if err != nil {
		return nil, err
	}
	ts := r.TS
	if ts == 0 {
		ts = opts.TS
	}
	return &facade.EventRecord{
		ID: r.ID, SID: opts.SID, TS: ts, Topic: topic, Key: opts.Key, Partition: opts.Partition,
		Headers: opts.Headers, Payload: payload, CausedBy: opts.CausedBy, Tags: opts.Tags, Seq: r.Seq,
	}, nil
}

// Ack implements [facade.Acker] for ManualAck subscriptions: it sends ACK
// and waits for the gateway's answer. An id whose lease is not current
// (never delivered, settled, expired) is an error matching
// facade.ErrUnknownID.
func (c *Client) Ack(ctx context.Context, topic, group, id string) (facade.Ack, error) {
	return c.settle(ctx, gateway.OpAck, topic, group, id, "")
}

// Nack implements [facade.Acker]: the event is handed back for redelivery
// with Attempt+1 (or dead-lettered after its last attempt).
func (c *Client) Nack(ctx context.Context, topic, group, id, reason string) (facade.Ack, error) {
	return c.settle(ctx, gateway.OpNack, topic, group, id, reason)
}

func (c *Client) settle(ctx context.Context, op, topic, group, id, reason string) (facade.Ack, error) {
	d, known := c.take(topic, group, id)
	f := &gateway.Frame{Op: op, Topic: topic, Group: group, ID: id, Reason: reason}
	if known {
		f.Attempt = d.attempt
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var err error
	if known {
		// On the connection it was delivered on: after a reconnect the
		// lease is gone.
		_, err = d.cn.request(ctx, f)
	} else {
		_, err = c.call(ctx, f)
	}
	if errors.Is(err, facade.ErrUnavailable) && known {
		err = fmt.Errorf("%w: the connection that delivered %s dropped; it was handed back: %w", facade.ErrUnknownID, id, err)
	}
	if err != nil {
		return facade.Ack{ID: id, Err: err.Error()}, err
	}
	return facade.Ack{ID: id, OK: true, Err: reason}, nil
}

// Extend implements [facade.Extender] with MODACK: the lease of event id
// moves to now + by (at least one second; the gateway caps it at its
// MaxAckTimeout).
func (c *Client) Extend(ctx context.Context, topic, group, id string, by time.Duration) error {
	if by <= 0 {
		return fmt.Errorf("%w: extension must be positive", facade.ErrInvalidOption)
	}
	ms := (by + time.Millisecond - 1).Milliseconds()
	f := &gateway.Frame{Op: gateway.OpModAck, Topic: topic, Group: group, ID: id, ExtendMs: ms}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if d, ok := c.peek(topic, group, id); ok {
		f.Attempt = d.attempt
		_, err := d.cn.request(ctx, f)
		return err
	}
	_, err := c.call(ctx, f)
	return err
}

// GetCursor implements [facade.Cursors] with the CURSOR extension.
func (c *Client) GetCursor(ctx context.Context, topic, group string) (*facade.CursorPosition, error) {
	r, err := c.call(ctx, &gateway.Frame{Op: gateway.OpCursor, Topic: topic, Group: group})
	if err != nil {
		return nil, err
	}
	if r.Cursor == nil {
		return nil, fmt.Errorf("%w: CURSOR answered without a cursor", gateway.ErrInternal)
	}
	return r.Cursor, nil
}

// SetCursor implements [facade.Cursors] with the SEEK extension.
func (c *Client) SetCursor(ctx context.Context, topic, group string, pos facade.CursorPosition) error {
	cur := facade.CursorPosition{LastID: pos.LastID, LastTS: pos.LastTS, LastSeq: pos.LastSeq}
	_, err := c.call(ctx, &gateway.Frame{Op: gateway.OpSeek, Topic: topic, Group: group, Cursor: &cur})
	return err
}
