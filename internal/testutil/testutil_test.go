package testutil

import (
	"strings"
	"testing"
	"time"
)

// The leak checks find a goroutine that is still running, and let it go
// once it has ended.
func TestLeakChecks(t *testing.T) {
	before := Goroutines()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); <-stop }()
	err := CheckNoLeaks(100*time.Millisecond, "testutil.TestLeakChecks")
	if err == nil || !strings.Contains(err.Error(), "leaked 1 goroutines") {
		t.Fatalf("CheckNoLeaks with a running goroutine: %v", err)
	}
	if NewGoroutines(before) == nil {
		t.Fatal("NewGoroutines did not report the running goroutine")
	}
	close(stop)
	<-done
	if err := CheckNoLeaks(5*time.Second, "testutil.TestLeakChecks"); err != nil {
		t.Fatal(err)
	}
	CheckFor(t, 5*time.Second, func() error { return NewGoroutines(before) })
}
