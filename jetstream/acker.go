package jetstream

import "sync"

// acker sends the acks of a subscription's handler-settled deliveries from
// one goroutine of its own, started with the first: a handler's goroutine
// then ends without calling into the NATS connection, whose publish path
// would grow its small stack, the largest cost of a delivery after the
// NATS work itself. It sends in the order it was given, as fast as it can,
// so an ack waits no longer than the acks before it.
type acker struct {
	s *subscription

	mu      sync.Mutex
	pending []*delivery
	started bool
	closed  bool
	wake    chan struct{} // a token when pending may have grown or it closed
	done    chan struct{} // closed when run returns
}

// add queues d's ack; false once the acker is closed (the caller then
// acks d itself).
func (a *acker) add(d *delivery) bool {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return false
	}
	if !a.started {
		a.started = true
		a.wake = make(chan struct{}, 1)
		a.done = make(chan struct{})
		go a.run()
	}
	a.pending = append(a.pending, d)
	first := len(a.pending) == 1
	a.mu.Unlock()
	if first {
		a.signal()
	}
	return true
}

func (a *acker) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *acker) run() {
	defer close(a.done)
	var batch []*delivery
	for {
		a.mu.Lock()
		batch, a.pending = a.pending, batch[:0]
		closed := a.closed
		a.mu.Unlock()
		for i, d := range batch {
			_ = a.s.ack(d) // a lost ack: the event comes again (at least once)
			batch[i] = nil
		}
		if closed {
			return
		}
		if len(batch) == 0 {
			<-a.wake
		}
	}
}

// close sends the acks still queued and ends the acker's goroutine.
func (a *acker) close() {
	a.mu.Lock()
	a.closed = true
	started := a.started
	a.mu.Unlock()
	if started {
		a.signal()
		<-a.done
	}
}
