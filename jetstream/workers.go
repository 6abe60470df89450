package jetstream

import "sync"

// maxIdleWorkers bounds the goroutines a subscription keeps waiting for
// handler calls: enough for a steady stream of short calls to go from one
// to the next without starting a goroutine each; after a burst of long
// calls the others end.
const maxIdleWorkers = 4

// workers runs a subscription's handler calls on goroutines it keeps, as
// concurrently as the deliveries come (MaxInFlight bounds them): a
// delivery never waits for a handler call to return while a worker could
// be started for it. Every queued delivery has a worker that takes it
// without entering a handler first (one between calls, one woken, or a new
// one), so the queue never waits behind a slow handler. A worker lives
// long enough that the stack the NATS publish path needs (its ack) is
// grown once, not per event.
type workers struct {
	s *subscription

	mu     sync.Mutex
	wake   sync.Cond
	queue  []*delivery // oldest first, from head
	head   int
	n      int // workers
	inCall int // workers inside a handler
	idle   int // workers waiting on wake, not yet woken
	closed bool
	wg     sync.WaitGroup
}

func (w *workers) init(s *subscription) {
	w.s = s
	w.wake.L = &w.mu
}

// submit queues d for a worker; the caller counted d in s.hwg.
func (w *workers) submit(d *delivery) {
	w.mu.Lock()
	w.queue = append(w.queue, d)
	// Workers that take a queued delivery without being woken.
	if claim := w.n - w.inCall - w.idle; len(w.queue)-w.head > claim {
		if w.idle > 0 {
			w.idle--
			w.wake.Signal()
		} else {
			w.n++
			w.wg.Add(1)
			go w.run()
		}
	}
	w.mu.Unlock()
}

func (w *workers) run() {
	defer w.wg.Done()
	w.mu.Lock()
	for {
		if w.head < len(w.queue) {
			d := w.queue[w.head]
			w.queue[w.head] = nil
			w.head++
			switch {
			case w.head == len(w.queue):
				w.queue, w.head = w.queue[:0], 0
			case w.head >= 64 && 2*w.head >= len(w.queue):
				// Never empty for long: move the rest to the front.
				n := copy(w.queue, w.queue[w.head:])
				clear(w.queue[n:])
				w.queue, w.head = w.queue[:n], 0
			}
			w.inCall++
			w.mu.Unlock()
			err := w.s.timedCall(d)
			w.mu.Lock()
			w.inCall--
			w.mu.Unlock()
			w.s.settle(d, err)
			w.s.hwg.Done()
			w.mu.Lock()
			continue
		}
		if w.closed || w.idle >= maxIdleWorkers {
			w.n--
			w.mu.Unlock()
			return
		}
		w.idle++
		w.wake.Wait()
	}
}

// close ends the workers: idle ones at once, the others when their calls
// return (and the queue is empty). wait waits for them.
func (w *workers) close() {
	w.mu.Lock()
	w.closed = true
	w.idle = 0
	w.wake.Broadcast()
	w.mu.Unlock()
}

func (w *workers) wait() { w.wg.Wait() }
