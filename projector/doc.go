// Package projector is the hub's heartbeat → process state feature, an
// application built on the bus, run by "eventhub -projector" and
// "eventhub -demo" (with [Demo]'s sample heartbeats):
// heartbeats ("heartbeat.received", payload [Heartbeat]) become process
// states ("process.state", keyed "host:name:pid", payload [ProcessState])
// with status "alive", or "stale" after [Config.StaleAfter] without a
// heartbeat.
//
// Decisions:
//
//   - The state lives in the compacted topic, not in memory: on start the
//     projector reads the newest state of every process back
//     ([facade.KeyScanner.Latest]), so a restarted hub continues where it was
//     and does not republish states that did not change. "process.state" must
//     be compacted: {pattern: process.state, compaction: true}.
//   - Heartbeats are read by a durable group with one heartbeat in flight, in
//     order; a heartbeat is acknowledged only after the state it changed is
//     stored, so a crash loses nothing (the heartbeat comes again). A
//     heartbeat older than the newest one seen for its process (a replay)
//     changes nothing.
//   - A state is published only when it changes. A status change ("alive" ↔
//     "stale") is published at once. Metric, sid and last_seen_ts changes are
//     published at most once per [Config.MinInterval] per process (default
//     5 s; the newest values, by the next heartbeat or the next check), so a
//     process sending a heartbeat every second costs one state event per
//     5 s, not one per heartbeat. A negative MinInterval
//     publishes every change.
//   - Staleness is checked every [Config.CheckEvery] against the heartbeat's
//     event time. Because last_seen_ts is stored at most every MinInterval, a
//     process read back as "alive" on start is given a fresh StaleAfter from
//     the start before it is marked stale: it is never marked stale early,
//     at worst StaleAfter late after a restart.
//   - All state changes are published by one goroutine, so the states of one
//     process are stored in the order they were decided.
//
// [Demo] publishes heartbeats of fake processes for `eventhub serve -demo`.
package projector
