package limits

import (
	"fmt"
	"testing"
)

// TestMaxTrackedBoundsTheBuckets: principals that publish once at a slow
// rate keep buckets that do not refill; MaxTracked still bounds how many
// the limiter keeps.
func TestMaxTrackedBoundsTheBuckets(t *testing.T) {
	l, err := New(Config{MaxTracked: 100, Rates: []RateRule{{Events: 0.1, EventsBurst: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if err := l.Publish(fmt.Sprintf("p%d", i), "a.b", 10); err != nil {
			t.Fatalf("p%d: %v", i, err)
		}
	}
	l.mu.Lock()
	n := len(l.buckets)
	l.mu.Unlock()
	if n > 100 {
		t.Fatalf("%d principals tracked, MaxTracked 100", n)
	}
}
