// Package testutil holds helpers shared by the project's tests.
package testutil

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
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

// RunCheckingLeaks runs the tests of m and then fails the run if goroutines
// whose stacks mention any of markers (such as "eventhub/gateway.") are
// still running after grace. Use it as os.Exit(RunCheckingLeaks(m, …)) in
// TestMain.
func RunCheckingLeaks(m *testing.M, grace time.Duration, markers ...string) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	deadline := time.Now().Add(grace)
	for {
		leaked := leakedGoroutines(markers)
		if len(leaked) == 0 {
			return code
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", strings.Join(leaked, "\n\n"))
			return 1
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func leakedGoroutines(markers []string) []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var leaked []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "testutil.RunCheckingLeaks") || strings.Contains(g, "testutil.leakedGoroutines") {
			continue
		}
		for _, m := range markers {
			if strings.Contains(g, m) {
				leaked = append(leaked, g)
				break
			}
		}
	}
	return leaked
}

// Buffer collects output (a process's, a logger's) that a test reads while
// it is still being written.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is what was written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
