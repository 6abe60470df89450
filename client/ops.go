package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/wire"
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
	f := &wire.Frame{Op: wire.OpPublish, Topic: topic, Payload: payload}
	if tc := facade.TraceFromContext(ctx); tc.Traceparent != "" {
		f.Trace = &tc // the hub's publish span continues the caller's trace
	}
	if err := setOpts(f, opts); err != nil {
		return nil, err
	}
	r, err := c.callRetrying(ctx, f)
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

// callRetrying is call that, with Config.RateLimitWait set, waits out
// rate_limited answers and sends the frame again.
func (c *Client) callRetrying(ctx context.Context, f *wire.Frame) (*wire.Frame, error) {
	var deadline time.Time
	if w := c.cfg.RateLimitWait; w > 0 {
		deadline = time.Now().Add(w)
	}
	for {
		r, err := c.call(ctx, f)
		wait, limited := facade.RetryAfter(err)
		if !limited || deadline.IsZero() || time.Now().Add(wait).After(deadline) {
			return r, err
		}
		if dl, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(dl) {
			return r, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return r, err
		case <-t.C:
		}
	}
}

// GetCursor implements [facade.Cursors] with the CURSOR extension.
func (c *Client) GetCursor(ctx context.Context, topic, group string) (*facade.CursorPosition, error) {
	r, err := c.call(ctx, &wire.Frame{Op: wire.OpCursor, Topic: topic, Group: group})
	if err != nil {
		return nil, err
	}
	if r.Cursor == nil {
		return nil, fmt.Errorf("%w: CURSOR answered without a cursor", wire.ErrInternal)
	}
	return r.Cursor, nil
}

var _ facade.KeyDeleter = (*Client)(nil)

// DeleteKey implements [facade.KeyDeleter] with the DELETE extension: the
// gateway stores a tombstone for key and answers with its id, seq and ts.
// It needs the right to publish to topic.
func (c *Client) DeleteKey(ctx context.Context, topic, key string, opts facade.DeleteOptions) (*facade.EventRecord, error) {
	f := &wire.Frame{Op: wire.OpDelete, Topic: topic, Key: key}
	if err := setOpts(f, opts); err != nil {
		return nil, err
	}
	r, err := c.callRetrying(ctx, f)
	if err != nil {
		return nil, err
	}
	return &facade.EventRecord{
		ID: r.ID, TS: r.TS, Topic: topic, Key: key, Payload: json.RawMessage("null"), Seq: r.Seq, Deleted: true,
	}, nil
}

// SetCursor implements [facade.Cursors] with the SEEK extension.
func (c *Client) SetCursor(ctx context.Context, topic, group string, pos facade.CursorPosition) error {
	cur := facade.CursorPosition{LastID: pos.LastID, LastTS: pos.LastTS, LastSeq: pos.LastSeq}
	_, err := c.call(ctx, &wire.Frame{Op: wire.OpSeek, Topic: topic, Group: group, Cursor: &cur})
	return err
}

// setOpts sets f's opts to opts as JSON, unless they are all zero.
func setOpts(f *wire.Frame, opts any) error {
	b, err := json.Marshal(opts)
	if err != nil {
		return fmt.Errorf("%w: opts: %w", facade.ErrInvalidOption, err)
	}
	if string(b) != "{}" {
		f.Opts = b
	}
	return nil
}
