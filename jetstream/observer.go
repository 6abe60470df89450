package jetstream

import "time"

// Observer receives what the bus does, for metrics. The bus asks for a
// topic's or a subscription's observer once and keeps it, so the per-event
// calls involve no lookups. Implementations must be safe for concurrent use
// and cheap: they run on the publish and delivery paths.
type Observer interface {
	Topic(topic string) TopicObserver
	Group(topic, group string) GroupObserver
}

// TopicObserver observes publishes to one topic.
type TopicObserver interface {
	// Published counts an event the store accepted (for PublishAsync: sent).
	Published()
}

// GroupObserver observes one subscription's deliveries.
type GroupObserver interface {
	// Delivered counts an event handed to the subscription.
	Delivered()
	// InFlight moves the gauge of delivered, unacknowledged events.
	InFlight(delta int)
	// Waited observes how long a delivery waited for a free in-flight slot
	// (the pull loop's wait before dispatch).
	Waited(d time.Duration)
	// Handled observes a handler's run time.
	Handled(d time.Duration)
	// Acked counts an ack; latency runs from the event's ts to the ack.
	Acked(latency time.Duration)
	// Nacked counts a nack (handler error or Nack).
	Nacked()
	// DeadLettered counts an event copied to the dead-letter topic.
	DeadLettered()
}

type nopObserver struct{}

func (nopObserver) Topic(string) TopicObserver         { return nopObserver{} }
func (nopObserver) Group(string, string) GroupObserver { return nopObserver{} }
func (nopObserver) Published()                         {}
func (nopObserver) Delivered()                         {}
func (nopObserver) InFlight(int)                       {}
func (nopObserver) Waited(time.Duration)               {}
func (nopObserver) Handled(time.Duration)              {}
func (nopObserver) Acked(time.Duration)                {}
func (nopObserver) Nacked()                            {}
func (nopObserver) DeadLettered()                      {}
