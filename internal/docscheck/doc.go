// Package docscheck holds the tests that keep README.md and docs/ true:
// their Go examples compile, their configuration examples load, their
// shell commands run, the Go identifiers their prose names exist, and the
// `go test` commands of their prose run (the longest are only held to the
// benchmarks and fuzz tests they name).
package docscheck
