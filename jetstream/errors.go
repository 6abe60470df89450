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
	if mapped := translateAPI(err); mapped != nil {
		return mapped
	}
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return fmt.Errorf("%w: the event is larger than the server's maximum message size", facade.ErrTooLarge)
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

// JetStream API error codes the hub maps to its own terminal codes.
const (
	apiAccountResources  = 10002 // resource limits exceeded for account
	apiInsufficient      = 10023 // insufficient resources
	apiMaxConsumers      = 10026 // maximum consumers limit reached
	apiMaxStreams        = 10027 // maximum number of streams reached
	apiMemoryResources   = 10028 // insufficient memory resources available
	apiStorageResources  = 10047 // insufficient storage resources available
	apiMessageTooLarge   = 10054 // message size exceeds maximum allowed
	apiStreamStoreFailed = 10077 // {err}: "maximum messages exceeded", …
	apiMsgTTLInvalid     = 10165 // invalid per-message TTL
	apiMsgTTLDisabled    = 10166 // per-message TTL is disabled
)

// translateAPI maps the JetStream API errors that retrying cannot fix to
// terminal codes, so that clients stop retrying: limits to
// ErrLimitExceeded, storage to ErrStorageFull, size to ErrTooLarge, a
// failed compare-and-set (expected last subject sequence) to
// ErrWrongLastSeq. nil for any other error.
func translateAPI(err error) error {
	var code jetstream.ErrorCode
	var desc string
	if ae, ok := errors.AsType[*jetstream.APIError](err); ok {
		code, desc = ae.ErrorCode, ae.Description
	} else if ae, ok := errors.AsType[*nats.APIError](err); ok {
		code, desc = jetstream.ErrorCode(ae.ErrorCode), ae.Description
	} else {
		return nil
	}
	switch code {
	case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
		return fmt.Errorf("%w: %s", facade.ErrWrongLastSeq, desc)
	case apiMsgTTLInvalid, apiMsgTTLDisabled:
		return fmt.Errorf("%w: ttl_seconds: %s (the topic's stream must allow per-message TTLs)", facade.ErrInvalidOption, desc)
	case apiMaxConsumers, apiMaxStreams, apiAccountResources:
		return fmt.Errorf("%w: %s", facade.ErrLimitExceeded, desc)
	case apiStorageResources, apiMemoryResources, apiInsufficient:
		return fmt.Errorf("%w: %s", facade.ErrStorageFull, desc)
	case apiMessageTooLarge:
		return fmt.Errorf("%w: %s", facade.ErrTooLarge, desc)
	case apiStreamStoreFailed:
		if strings.Contains(desc, "maximum") {
			return fmt.Errorf("%w: %s", facade.ErrLimitExceeded, desc)
		}
	}
	return nil
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
