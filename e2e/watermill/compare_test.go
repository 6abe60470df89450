package watermill_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/internal/benchcmp"
)

// These are the jetstream package's benchmark helpers, so that the figures
// here read like the ones of its benchmarks.

const benchWindow = 4000

// contestant is one path of a comparison (see benchcmp.Compare).
type contestant = benchcmp.Contestant

func compareAll(b *testing.B, unit string, cs ...contestant) { benchcmp.Compare(b, unit, cs...) }

// payloadOf is a JSON string payload of size bytes.
func payloadOf(size int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("x", size-2) + `"`)
}

// rawPublishAsync publishes m asynchronously and, when nats.go gave up
// waiting for room in its window (ErrTooManyStalledMsgs), waits for the
// pending publishes and tries again.
func rawPublishAsync(b *testing.B, js njs.JetStream, m *nats.Msg) {
	for attempt := 0; ; attempt++ {
		_, err := js.PublishMsgAsync(m)
		if err == nil {
			return
		}
		if !errors.Is(err, njs.ErrTooManyStalledMsgs) || attempt == 20 {
			b.Fatal(err)
		}
		<-js.PublishAsyncComplete()
	}
}
