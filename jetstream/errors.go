package jetstream

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

// translate maps NATS errors to facade sentinels, keeping the original in the
// chain.
func translate(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return fmt.Errorf("%w: %w", facade.ErrTooLarge, err)
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, jetstream.ErrConnectionClosed):
		return fmt.Errorf("%w: %w", facade.ErrClosed, err)
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrNoServers), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, jetstream.ErrTooManyStalledMsgs), errors.Is(err, jetstream.ErrAsyncPublishTimeout):
		return fmt.Errorf("%w: %w", facade.ErrUnavailable, err)
	case errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, jetstream.ErrConsumerNotFound):
		return fmt.Errorf("%w: %w", facade.ErrNotFound, err)
	}
	return err
}

// RedactURL removes credentials from NATS URLs, for logs and errors.
func RedactURL(u string) string {
	parts := strings.Split(u, ",")
	for i, p := range parts {
		pu, err := url.Parse(strings.TrimSpace(p))
		if err != nil || pu.User == nil {
			continue
		}
		pu.User = url.User("redacted")
		parts[i] = pu.String()
	}
	return strings.Join(parts, ",")
}
