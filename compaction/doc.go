// Package compaction keeps a compacted snapshot of a topic whose full
// history is kept: for "process.state" (every change, for audit and replay)
// it maintains "process.state.snapshot", which holds only the newest event of
// each key, so a cold start reads one event per key instead of the history.
//
// A [Compactor] is a durable group on the source topic with one event in
// flight (so per-key order holds) that republishes each keyed event to the
// snapshot topic with the same key, payload, timestamp and envelope, under an
// id derived from the source event's id ([SnapshotID]). The snapshot topic is
// compacted by the bus (JetStream's max_msgs_per_subject 1 on its stream), so
// each republish replaces the key's previous snapshot event.
//
// Decisions:
//
//   - The snapshot topic's compaction comes from the bus's topic
//     configuration ({pattern: process.state.snapshot, compaction: true}),
//     not from the compactor creating a stream: the topic stays an ordinary
//     topic of the hub, with the retention, storage and replicas an operator
//     sets for it. [Start] refuses a snapshot topic the bus reports as not
//     compacted (facade.ErrNotCompacted).
//   - Progress is the group's cursor in JetStream: a restarted compactor
//     resumes after the last event it acknowledged, and does not reprocess the
//     history. An event is acknowledged only after the snapshot stored its
//     copy; an event republished again after a crash carries the same id and
//     is dropped as a duplicate within the snapshot stream's duplicate window
//     (2 minutes by default); after it, the copy replaces an identical one,
//     which changes nothing but the snapshot's sequence.
//   - Unkeyed events of the source are skipped: a snapshot is by key.
//   - A tombstone of the source (a deleted key, facade.KeyDeleter) deletes
//     the key from the snapshot too, with a tombstone of its own.
//   - A republish that keeps failing is retried up to [MaxAttempts] times
//     with the bus's backoff before the bus dead-letters the event to
//     "<source>.dlq"; the snapshot of that key is then stale until its next
//     update.
//
// The compactor follows the source continuously rather than querying every
// key on a timer: the snapshot lags the source by one republish.
package compaction
