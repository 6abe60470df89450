package gateway

import (
	"context"
	"fmt"
	"sync"

	"github.com/eventhub/eventhub/facade"
)

// shared is what a value of a [sharedTable] holds to be shared: whether it
// started, and how many hold it.
type shared struct {
	ready chan struct{} // closed once started (or failed)
	err   error         // why it failed; read after ready
	refs  int           // guarded by the table's mu
}

func (s *shared) state() *shared { return s }

// sharedTable holds the values the gateway shares between sessions, one per
// key, each started by its first user and stopped by its last: the bus
// members of groups and the followers of live topics.
type sharedTable[K comparable, V interface {
	comparable
	state() *shared
}] struct {
	what string // "the group's member", for errors
	mu   sync.Mutex
	m    map[K]V
}

func newSharedTable[K comparable, V interface {
	comparable
	state() *shared
}](what string) *sharedTable[K, V] {
	return &sharedTable[K, V]{what: what, m: make(map[K]V)}
}

// join takes a reference to the value of k. The first user makes it with
// newV and starts it with start, outside the lock; the others wait for that
// to end, or for ctx. created says whether this call started it.
func (t *sharedTable[K, V]) join(ctx context.Context, k K, newV func() V, start func(V) error) (v V, created bool, err error) {
	t.mu.Lock()
	v, ok := t.m[k]
	if !ok {
		v = newV()
		v.state().ready = make(chan struct{})
		t.m[k] = v
	}
	s := v.state()
	s.refs++
	t.mu.Unlock()

	if !ok {
		s.err = start(v)
		close(s.ready)
	} else {
		select {
		case <-s.ready:
		case <-ctx.Done():
			t.unref(k, v)
			var zero V
			return zero, false, fmt.Errorf("%w: waiting for %s: %w", facade.ErrUnavailable, t.what, ctx.Err())
		}
	}
	if s.err != nil {
		t.unref(k, v)
		var zero V
		return zero, false, s.err
	}
	return v, !ok, nil
}

// unref drops one reference to v and reports whether it was the last of a
// started value (v is then out of the table, and the caller stops it).
func (t *sharedTable[K, V]) unref(k K, v V) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := v.state()
	s.refs--
	if s.refs > 0 {
		return false
	}
	if t.m[k] == v {
		delete(t.m, k)
	}
	return s.err == nil
}

// values returns the values in the table.
func (t *sharedTable[K, V]) values() []V {
	t.mu.Lock()
	defer t.mu.Unlock()
	vs := make([]V, 0, len(t.m))
	for _, v := range t.m {
		vs = append(vs, v)
	}
	return vs
}

// len returns how many values the table holds.
func (t *sharedTable[K, V]) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
