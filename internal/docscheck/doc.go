// Package docscheck holds the test that compiles the Go examples of the
// README, so that what a user copies builds.
package docscheck
