// Package livebench holds the benchmark of live subscriptions: one topic, every
// event to every connection, through the hub's WebSocket gateway, through
// Centrifuge (the Go library behind Centrifugo) and through NATS's own
// WebSocket listener, side by side in one run. The servers run in the
// benchmark process; the connections run in a child process (the test
// binary run again as a client helper), each contestant's with its own
// official Go client: eventhub's client package (batched frames, its
// default), centrifuge-go (JSON protocol) and nats.go. Each process's CPU
// time is its own: the figures are server and client CPU per delivered
// event, delivered events/s, and publish → receive latency. Contestants
// take turns over several rounds; each measure is reported as the median,
// min and max of the rounds, and as the ratios hub/Centrifuge and hub/NATS
// of the medians.
//
// The whole benchmark (about half an hour on two cores):
//
//	cd e2e && go test -run '^$' -bench . -benchtime 1x ./livebench/
//
// TestLiveBenchShort runs its throughput and latency cases once, small.
//
// EVENTHUB_LIVEBENCH_ROUNDS sets the rounds (default 3),
// EVENTHUB_LIVEBENCH_ONLY a comma-separated subset of hub, centrifuge
// and nats (for a profile of one contestant with -cpuprofile), and
// EVENTHUB_LIVEBENCH_WINDOW how many events the throughput runs keep
// ahead of the slowest connection (default 500).
package livebench
