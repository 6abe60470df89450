// Package facadetest is the conformance suite of [facade.Bus]
// implementations. Each implementation's tests call [Run] with an [Env] that
// builds buses over one shared store; every case derives its topic and group
// names from t.Name(), so cases run in parallel.
package facadetest

import (
	"context"
	"testing"

	"github.com/eventhub/eventhub/facade"
)

// Env is what the suite needs from an implementation.
type Env struct {
	// NewBus returns a new, independent bus over the environment's store,
	// as a separate hub process would be. The environment closes it at the
	// end of the test; a test may close it earlier.
	NewBus func(t testing.TB) facade.Bus
	// Restart, when set, restarts the store (the NATS server) and keeps its
	// data; buses made before it are closed or unusable afterwards.
	Restart func(t testing.TB)
	// Native, when set, returns a plain NATS client of the store, for the
	// interoperability cases. The suite stays free of any NATS package:
	// the implementation's tests supply the client.
	Native func(t testing.TB) Native
	// Family, when set, is a topic prefix whose topics the environment's
	// buses keep in one family stream (configured as the topic family
	// {pattern: Family + ".**", stream: …}); the wildcard-subscription
	// cases read patterns below it. Empty skips them.
	Family string
	// Expiring, when set, is a topic prefix whose topics turn an expired
	// key into a delete (configured with {pattern: Expiring + ".**",
	// deleteMarkerTTL: 1s}). Empty skips the case.
	Expiring string
	// Features switches off cases an implementation cannot support.
	Features Features
}

// Features lists optional behaviour.
type Features struct {
	// NoCursors: GetCursor / SetCursor are not supported.
	NoCursors bool
	// NoKeys: LatestByKey is not supported.
	NoKeys bool
	// NoFilter: SubscribeOptions.Filter is not honoured.
	NoFilter bool
}

// Native is a plain JetStream client of the store, as a program that does
// not use eventhub would be.
type Native interface {
	// Publish stores data on subject through JetStream, without headers.
	Publish(ctx context.Context, subject string, data []byte) error
	// Follow reads the messages stored on topic and every subject below it
	// (keyed events included), in stream order, as a plain consumer would;
	// each call of the returned function blocks until the next message, or
	// fails after 15 seconds.
	Follow(t testing.TB, topic string) func() (NativeMsg, error)
}

// NativeMsg is a message as a plain NATS client sees it.
type NativeMsg struct {
	Subject string
	Data    []byte
	// Header holds the message's headers, keys as stored.
	Header map[string][]string
	// Seq is the message's stream sequence.
	Seq uint64
}

// Get returns the first value of header key, or "".
func (m NativeMsg) Get(key string) string {
	if v := m.Header[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
