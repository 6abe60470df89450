package facade

import (
	"context"
	"encoding/json"
	"fmt"
)

// PublishJSON marshals v and publishes it with p.
func PublishJSON[T any](ctx context.Context, p Publisher, topic string, v T, opts PublishOptions) (*EventRecord, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadPayload, err)
	}
	return p.Publish(ctx, topic, b, opts)
}

// HandleJSON adapts a handler of typed payloads. A payload that does not
// unmarshal into T fails the delivery (it is nacked and, after MaxAttempts,
// dead-lettered).
func HandleJSON[T any](fn func(ctx context.Context, d Delivery, payload T) error) Handler {
	return func(ctx context.Context, d Delivery) error {
		var v T
		if err := json.Unmarshal(d.Event().Payload, &v); err != nil {
			return fmt.Errorf("decode payload of %s: %w", d.Event().ID, err)
		}
		return fn(ctx, d, v)
	}
}
