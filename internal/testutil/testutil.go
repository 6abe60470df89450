// Package testutil holds helpers shared by the project's tests.
package testutil

import (
	"testing"
	"time"
)

// CheckFor polls cond every 10 ms until it returns nil, and fails the test
// with cond's last error when timeout passes first. Tests wait on
// conditions with deadlines, never on sleeps.
func CheckFor(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
