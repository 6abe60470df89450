// Package facade is eventhub's public Go API: the event envelope, the
// publish / subscribe / ack / cursor operations, their options and the errors
// callers can test for.
//
// The API is split the way callers use it. [Publisher], [Subscriber] and
// [Cursors] are small interfaces composed into [Bus]; a caller accepts the
// narrowest one it needs. Optional capabilities ([AsyncPublisher],
// [KeyReader]) are separate interfaces found by type assertion.
//
// Several packages implement [Bus]: package jetstream on an embedded or
// external NATS server, and the WebSocket client of package client. The
// conformance suite in facade/facadetest runs against each of them.
//
// # Topics
//
// A topic is a dot-separated name such as "heartbeat.received". Each segment
// is 1 to 64 characters from [A-Za-z0-9_-:] and may not start with '_'
// (segments starting with '_' are reserved for the hub's subject layout). A
// topic has at most 16 segments and 255 characters. [ValidateTopic] returns an
// error wrapping [ErrBadTopic] for anything else.
//
// # Delivery
//
// Delivery is at least once. A group is a durable cursor over a topic: members
// of one group share its events, separate groups each receive every event.
// A handler receives a [Delivery]: a handle that owns the delivery's lease
// and settles it once (Ack, Nack, Extend). A handler that returns nil
// acknowledges its delivery (unless [SubscribeOptions.ManualAck] is set,
// when the caller settles the handle); an error, or [Delivery.Nack], hands
// the event back for redelivery with Attempt+1. Subscribe returns a
// [Subscription] handle to stop or drain it and to learn why it ended. After MaxAttempts failed attempts
// the event is copied to the dead-letter topic [DeadLetterTopic] and no longer
// blocks the group.
//
// This package imports nothing from NATS.
package facade
