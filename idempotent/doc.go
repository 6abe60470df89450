// Package idempotent makes a consumer group's handler take effect once per
// event id, although the bus delivers at least once: an event is
// redelivered after a crash, an expired lease or a lost acknowledgement,
// and a publisher retrying outside the stream's duplicate window (see
// outbox) stores a second copy with the same id.
//
// Two stores keep the marks of processed ids, per group:
//
//   - [SQL] (PostgreSQL or SQLite): the mark and the handler's own writes
//     commit in one transaction, before the acknowledgement. A crash at any
//     point applies the event once: before the commit nothing happened,
//     after it the redelivery finds the mark and is acknowledged without
//     running the handler. This is exactly-once in effect for everything
//     the handler writes through the transaction.
//   - [KV] (a JetStream key-value bucket on the bus's own server): check
//     the mark, run the handler, put the mark, acknowledge. It skips
//     redeliveries of events whose mark was put (a lost ack, a duplicate
//     publish) but not those of a handler that crashed between its effect
//     and the mark: use it for effects that are themselves cheap to repeat
//     or outside any database, and [SQL] where the effect lives in one.
//
// Both wrap a handler into a [facade.Handler] for Subscribe (not with
// ManualAck): the wrapped handler acknowledges the delivery itself and
// returns the handler's error, which nacks it.
//
// # How long marks live
//
// A mark must outlive every later copy of its event: redeliveries (at most
// MaxAttempts × AckTimeout plus backoffs after the first delivery) and
// duplicates published again by id, which JetStream drops only within the
// stream's duplicate window (2 minutes by default;
// jetstream.TopicConfig.DuplicateWindow). [KVConfig.TTL] defaults to 24
// hours and may not be shorter than the duplicate window of the topics in
// [KVConfig.Topics]; SQL marks stay until [SQL.Prune] deletes them.
package idempotent
