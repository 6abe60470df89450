// Package outbox is eventhub's transactional outbox: a service writes its
// business rows and the events they cause in one database transaction, and a
// [Drainer] publishes the events to the bus afterwards. An event is published
// if and only if its transaction committed, even when the service, the
// database or NATS fails in between.
//
// # Writing
//
// [Store.Add] (or [Store.AddMany]) takes the caller's *sql.Tx:
//
//	tx, err := db.BeginTx(ctx, nil)
//	if err != nil { ... }
//	defer tx.Rollback()
//	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, total) VALUES ($1, $2)`, 42, 1999); err != nil { ... }
//	id, err := store.Add(ctx, tx, outbox.Record{
//		Topic:   "orders.created",
//		Key:     "order:42",
//		Payload: json.RawMessage(`{"order":42,"total":1999}`),
//	})
//	if err != nil { ... }
//	if err := tx.Commit(); err != nil { ... }
//	drainer.Notify() // optional: publish now rather than at the next poll
//
// The record id (a uuidv7 from [facade.NewID] unless Record.ID is set)
// becomes the event id and the message's Nats-Msg-Id; the record's creation
// time becomes the event's timestamp. Add validates the record the way the
// bus will (topic, key, JSON payload, id) so that a record that can never be
// published fails the caller's transaction instead.
//
// # Stores
//
// A [Store] is one table (default [DefaultTable], see [StoreConfig]) in
// PostgreSQL or SQLite, on database/sql. [Open] picks the driver from a DSN
// (postgres:// or postgresql:// for PostgreSQL through pgx; sqlite:, file:
// or a file path for SQLite through the pure-Go modernc.org/sqlite) and
// creates the table and its indexes. This package links neither driver:
// import package outbox/postgres or outbox/sqlite, or both, for the
// databases the program uses; [NewStore] wraps a *sql.DB the service
// already has, and [Store.Migrate] creates the table (idempotent).
//
// On PostgreSQL a drainer claims a batch in one statement that locks the
// oldest due rows with FOR UPDATE SKIP LOCKED, so drainers in several
// processes claim disjoint batches without waiting for each other, and
// transactions that commit out of id order are never skipped (there is no
// offset to move past them). SQLite has no SKIP LOCKED: the claim is one
// UPDATE ... RETURNING statement, and SQLite runs one writer at a time, so
// claims serialise; open it with a busy timeout and WAL ([SQLiteDSN]).
//
// MongoDB: package outbox/mongo is a store on a MongoDB collection that the
// same [Drainer] drains (any [Backend] does); see its documentation.
//
// # Statuses and retries
//
// A record is pending, claimed, sent or error ([Status]). A drainer claims up
// to BatchSize due pending records, oldest first (creation time, then id),
// with a lease, and publishes each through a [facade.Publisher] (pipelined
// when the publisher is a [facade.AsyncPublisher]). Then, for each record:
//
//   - published: it is marked sent, but only while the claim is still the
//     drainer's (same worker and attempt); sent records are deleted after
//     Config.Retention;
//   - refused for good (the error wraps facade.ErrBadTopic, ErrBadPayload,
//     ErrBadKey, ErrKeyRequired, ErrTooLarge, ErrBadID or ErrInvalidOption,
//     see [IsPermanent]): it is parked as error at once, with the reason in
//     last_err;
//   - the event store was unavailable (facade.ErrUnavailable, ErrClosed or a
//     timeout, see [IsUnavailable]): it goes back to pending after a backoff
//     that grows while the outage lasts, and the attempt is not counted, so
//     an outage of any length parks nothing;
//   - any other failure: it goes back to pending with next_attempt_at = now +
//     BackoffBase*2^(attempts-1) (at most BackoffMax) and last_err; after
//     MaxAttempts attempts it is parked as error.
//
// A drainer that dies holding a claim leaves it until the lease expires; any
// drainer then requeues it (or parks it if its attempts are used up).
// [Store.RetryFailed] puts parked records back. [Store.Stats] reads the
// backlog (pending count, age of the oldest unsent record) and
// [Drainer.Stats] the drainer's counters, for metrics.
//
// # Exactly once in the stream: the duplicate window
//
// The drainer publishes at least once: a drainer can die, lose its lease or
// lose an acknowledgement after the event was stored and before the record
// was marked sent, and then the record is published again. Because the
// record id is the message's Nats-Msg-Id, JetStream drops the second copy
// when it arrives within the stream's duplicate window (default 2 minutes;
// jetstream.TopicConfig.DuplicateWindow per topic), and the stream holds the
// event once.
//
// The window must therefore cover the drainer's retry horizon, the longest
// time from a publish that may have been stored to its last retry:
// [Config.RetryHorizon], about 3.3 minutes with the defaults (backoffs of 9
// retries up to 30s, a 5s timeout per attempt and a 30s lease). Give outbox
// topics a DuplicateWindow of at least that (5 minutes with the defaults),
// or lower MaxAttempts and BackoffMax. A retry outside the window, or after
// an outage longer than the window that started right after an ambiguous
// publish, stores a second copy with the same id: consumers that must not
// see one twice should still deduplicate by event id.
//
// Order: records are claimed oldest first and a single drainer publishes
// them in that order, but a retried record is published after younger ones,
// and several drainers publish concurrently.
//
// # Concurrency and lifecycle
//
// Store and Drainer are safe for concurrent use. [Drainer.Run] blocks until
// [Drainer.Shutdown] (finish the batch in progress, then stop), [Drainer.Close]
// (stop now, handing unpublished claims back) or the end of its context.
// Several drainers, in one process or several, can drain one table; each
// needs a unique Config.WorkerID (the default is).
package outbox
