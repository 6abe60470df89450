package ops_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/eventhub/eventhub/internal/natstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, natstest.LeakIgnores()...)
}
