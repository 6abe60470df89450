package benchcmp

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
)

// RawPublishAsync publishes m asynchronously with nats.go and, when
// nats.go gave up waiting for room in its window (ErrTooManyStalledMsgs),
// waits for the pending publishes and tries again.
func RawPublishAsync(b *testing.B, js njs.JetStream, m *nats.Msg) {
	b.Helper()
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
