//go:build race

package outbox_test

// raceEnabled: the race detector slows SQLite (transpiled C) down a lot.
const raceEnabled = true
