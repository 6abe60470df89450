// Package ops serves eventhub's operations endpoints over HTTP: group
// cursors and lag, topics and their streams, the newest event of a key,
// liveness and readiness probes, and replay of a range of a topic as
// NDJSON. [Export] writes the same NDJSON to any io.Writer (the
// `eventhub export` subcommand).
//
// Every answer comes from JetStream's own state (stream and consumer info)
// and single-message lookups; no endpoint reads a topic to compute a
// figure. Replay streams a range with an ordered consumer and holds only a
// bounded batch in memory, however long the range.
//
// A [Handler] is a plain http.Handler; mount it on the ops port (see
// docs/http-api.md for the endpoints, their answers and error statuses).
package ops
