// Package docscheck holds the tests that compile the Go examples of the
// README, so that what a user copies builds, and that check that the Go
// identifiers the docs' prose names exist.
package docscheck
