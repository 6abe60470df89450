package ops_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// nats.go's in-process connections keep a flusher until closed by the
		// server side; the server's own goroutines end with Shutdown.
		goleak.IgnoreTopFunction("github.com/nats-io/nats.go.(*Conn).flusher"),
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).startGoRoutine"),
	)
}
