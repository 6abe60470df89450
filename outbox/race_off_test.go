//go:build !race

package outbox_test

const raceEnabled = false
