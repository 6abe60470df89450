// Package testutil holds helpers shared by the project's tests.
package testutil

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
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

// The goroutine-leak checks of every package's tests: RunCheckingLeaks in
// TestMain, or CheckNoLeaks after a TestMain that runs m itself, and
// Goroutines / NewGoroutines inside one test.

// LeakMarkers are the frames that make a goroutine count as a leak in
// packages whose tests run a bus: the project's own code and nats.go's (a
// connection left open). The embedded server's goroutines end with its
// Shutdown and are not counted.
var LeakMarkers = []string{"github.com/eventhub/eventhub/", "github.com/nats-io/nats.go"}

// RunCheckingLeaks runs the tests of m and then fails the run if goroutines
// whose stacks mention any of markers (such as "eventhub/gateway.") are
// still running after grace. Use it as os.Exit(RunCheckingLeaks(m, …)) in
// TestMain.
func RunCheckingLeaks(m *testing.M, grace time.Duration, markers ...string) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	if err := CheckNoLeaks(grace, markers...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

// CheckNoLeaks polls until no goroutine other than the caller's runs code
// whose stack mentions any of markers, and returns the leaked stacks as an
// error when grace passes first.
func CheckNoLeaks(grace time.Duration, markers ...string) error {
	deadline := time.Now().Add(grace)
	for {
		var leaked []string
		for _, g := range stacks() {
			if slices.ContainsFunc(markers, func(m string) bool { return strings.Contains(g.stack, m) }) {
				leaked = append(leaked, g.stack)
			}
		}
		if len(leaked) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("leaked %d goroutines:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond) // polling interval, bounded by deadline
	}
}

// Goroutines returns the ids of the goroutines running now, for
// [NewGoroutines].
func Goroutines() map[string]bool {
	ids := make(map[string]bool)
	for _, g := range stacks() {
		ids[g.id] = true
	}
	return ids
}

// NewGoroutines returns nil when every goroutine running now, other than the
// caller's, was in before, or else an error listing the others' stacks. Use
// it inside CheckFor: goroutines a test started must end.
func NewGoroutines(before map[string]bool) error {
	var extra []string
	for _, g := range stacks() {
		if !before[g.id] {
			extra = append(extra, g.stack)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	return fmt.Errorf("%d goroutines still running:\n\n%s", len(extra), strings.Join(extra, "\n\n"))
}

type goroutine struct{ id, stack string }

// stacks returns every goroutine but the caller's.
func stacks() []goroutine {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []goroutine
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 { // the caller's goroutine comes first
			continue
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
		out = append(out, goroutine{id: id, stack: g})
	}
	return out
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

// AllTopics enumerates every topic over alphabet with 1..maxLen segments,
// for tests that check pattern matching against brute force.
func AllTopics(alphabet []string, maxLen int) []string {
	var out []string
	cur := []string{""}
	for range maxLen {
		var next []string
		for _, prefix := range cur {
			for _, a := range alphabet {
				t := a
				if prefix != "" {
					t = prefix + "." + a
				}
				next = append(next, t)
			}
		}
		out = append(out, next...)
		cur = next
	}
	return out
}
