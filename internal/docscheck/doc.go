// Package docscheck holds the tests that keep README.md and docs/ true:
// their Go examples compile, their configuration examples load, their
// shell commands run, the Go identifiers their prose names exist, and the
// benchmarks and fuzz tests their `go test` commands name exist.
package docscheck
