// Package docscheck holds the tests that keep README.md and docs/ true:
// their Go examples compile, their configuration examples load, their
// shell commands run, and the Go identifiers their prose names exist.
package docscheck
