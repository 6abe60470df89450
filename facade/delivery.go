package facade

import (
	"context"
	"time"
)

// Delivery is one delivery of an event to a subscription: a handle that
// owns the delivery's lease and settles it. Implementations are safe for
// concurrent use.
//
// A delivery is settled once: the first of Ack, Nack, or the lease's
// deadline passing wins. Settling again returns an error wrapping
// [ErrSettled] (after Ack or Nack) or [ErrExpired] (after the deadline
// passed and the event was handed back to the group); the event's fate is
// whatever the first settlement decided.
//
// Extend moves the deadline of an unsettled delivery; it may be called any
// number of times.
type Delivery interface {
	// Event is the delivered event. It is shared: do not modify it.
	Event() *EventRecord
	// Group is the consumer group the event is delivered to.
	Group() string
	// Attempt counts deliveries of this event to the group, starting at 1.
	Attempt() int
	// MaxAttempts is the subscription's limit: an event that fails on
	// attempt MaxAttempts goes to the dead-letter topic.
	MaxAttempts() int
	// Deadline is when the lease ends: unless the delivery is settled or
	// extended by then, the event is handed back to the group and
	// redelivered with Attempt+1.
	Deadline() time.Time
	// Ack acknowledges the event: the group does not deliver it again.
	// It blocks until the acknowledgement is sent, not until the store
	// confirmed it (a lost acknowledgement means a redelivery).
	Ack(ctx context.Context) error
	// Nack hands the event back for redelivery with Attempt+1 after the
	// bus's retry backoff, or to the dead-letter topic when this was the
	// last attempt. reason travels with a dead letter.
	Nack(ctx context.Context, reason string) error
	// Extend sets the deadline to now + by, however long that is.
	Extend(ctx context.Context, by time.Duration) error
	// AfterExpire arranges for f to run, in its own goroutine, when the
	// delivery ends without Ack or Nack: its deadline passed, the group
	// redelivered the event, or the subscription stopped and handed it
	// back. If that happened already, f runs at once; after Ack or Nack it
	// never runs. A holder that leases the event on (as the WebSocket
	// gateway does) times the lease by it instead of a clock of its own.
	// Call it at most once per delivery.
	AfterExpire(f func())
}

// Releaser is the optional capability of a [Delivery] to hand its event
// back without spending an attempt: for events that never reached their
// consumer (a WebSocket gateway releases the events it had queued but not
// written when a connection drops). The event is redelivered after the
// retry backoff with the same attempt number.
type Releaser interface {
	Release(ctx context.Context) error
}

// Handler processes one delivery. Unless the subscription is ManualAck,
// returning nil acknowledges the delivery and returning an error nacks it
// with the error's text as reason; a delivery the handler settled itself
// stays as the handler settled it. With ManualAck, the handler only
// receives the delivery: it stays in flight until the caller, who may keep
// the handle, settles it or its deadline passes. The context is cancelled
// when the subscription stops.
//
// Handlers of one subscription run concurrently, up to MaxInFlight at a
// time. With MaxInFlight 1 they run one at a time in stream order: use it
// where order matters, as projections do; with OrderBy [OrderByKey] the
// events of one key run one at a time, in stream order, and different keys
// in parallel. ManualAck handlers always run
// one at a time, in stream order, and should return quickly.
type Handler func(ctx context.Context, d Delivery) error

// Subscription is a running subscription: a handle to stop it and to learn
// when and why it ended. Implementations are safe for concurrent use.
type Subscription interface {
	// Stop ends the subscription at once: no new deliveries, running
	// handlers are cancelled and awaited, and deliveries not yet settled
	// are handed back to the group (they are redelivered without waiting
	// for their deadline). It is idempotent and returns ctx.Err() when
	// handlers did not return in time.
	Stop(ctx context.Context) error
	// Drain ends the subscription gracefully: no new deliveries, and it
	// waits until every delivery it made is settled (by its handler, by
	// the caller, or by its deadline) before it stops. When ctx ends
	// first, Drain stops as Stop does and returns ctx.Err().
	Drain(ctx context.Context) error
	// Done is closed when the subscription has ended, by Stop, Drain, or
	// on its own (the bus or the connection closed, the server ended it).
	Done() <-chan struct{}
	// Err is why the subscription ended on its own (wrapping
	// [ErrClosed], [ErrForbidden] or the server's error); nil while it
	// runs and after Stop or Drain.
	Err() error
}
