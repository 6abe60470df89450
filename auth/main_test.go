package auth

import (
	"os"
	"testing"
	"time"

	"github.com/eventhub/eventhub/internal/testutil"
)

func TestMain(m *testing.M) {
	os.Exit(testutil.RunCheckingLeaks(m, 10*time.Second, testutil.LeakMarkers...))
}
