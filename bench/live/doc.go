// Package live holds the benchmark of live subscriptions: one topic, every
// event to every connection, through the hub's WebSocket gateway, through
// Centrifuge (the Go library behind Centrifugo) and through NATS's own
// WebSocket listener, side by side in one run. The servers run in the
// benchmark process and the WebSocket clients in a child process (the
// test binary run again as a client helper), so the benchmark process's
// CPU time is the servers' own. Contestants take turns over several
// rounds; each measure is reported as the median, min and max of the
// rounds, and as the ratio hub/Centrifuge of the medians.
//
// Nothing here runs without -bench:
//
//	go test -run '^$' -bench . -benchtime 1x ./bench/live/
//
// EVENTHUB_LIVEBENCH_ROUNDS sets the rounds (default 3),
// EVENTHUB_LIVEBENCH_ONLY a comma-separated subset of hub, centrifuge
// and nats (for a profile of one contestant with -cpuprofile), and
// EVENTHUB_LIVEBENCH_WINDOW how many events the throughput runs keep
// ahead of the slowest connection (default 500).
package live
