// Package facadetest is the conformance suite of [facade.Bus]
// implementations. Each implementation's tests call [Run] with an [Env] that
// builds buses over one shared store; every case derives its topic and group
// names from t.Name(), so cases run in parallel.
package facadetest

import (
	"testing"

	"github.com/nats-io/nats.go"

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
	// NATS, when set, returns a plain NATS connection to the store, for the
	// interoperability cases.
	NATS func(t testing.TB) *nats.Conn
	// Features switches off cases an implementation cannot support.
	Features Features
}

// Features lists optional behaviour.
type Features struct {
	// NoCursors: GetCursor / SetCursor are not supported.
	NoCursors bool
	// NoKeys: LatestByKey is not supported.
	NoKeys bool
	// NoInProcessFilter: SubscribeOptions.Filter is not honoured.
	NoFilter bool
}
