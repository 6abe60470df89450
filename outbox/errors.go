package outbox

import (
	"context"
	"errors"

	"github.com/eventhub/eventhub/facade"
)

// Sentinel errors of the package. Errors returned by the package wrap them
// (or the facade sentinels named in each method's documentation), so test
// with errors.Is.
var (
	// ErrInvalidConfig: a StoreConfig or Config value is out of range.
	ErrInvalidConfig = errors.New("outbox: invalid configuration")
	// ErrNotFound: no outbox record has that id.
	ErrNotFound = errors.New("outbox: record not found")
	// ErrLeaseLost: the record is no longer claimed by this worker (its lease
	// expired and it was requeued, and perhaps claimed by another worker).
	ErrLeaseLost = errors.New("outbox: lease lost")
	// ErrClosed: the drainer was closed; it cannot run again.
	ErrClosed = errors.New("outbox: drainer closed")
	// ErrRunning: Run was called while the drainer is already running.
	ErrRunning = errors.New("outbox: drainer already running")
	// ErrUnsupportedDSN: Open cannot tell which database a DSN is for.
	ErrUnsupportedDSN = errors.New("outbox: unsupported DSN")
	// ErrDriverNotLinked: Open was given a DSN whose database/sql driver
	// the program does not link (import outbox/postgres or outbox/sqlite).
	ErrDriverNotLinked = errors.New("outbox: database driver not linked")
)

// permanentErrors are the facade errors that publishing the same record again
// can never fix: the drainer parks such a record as [StatusError] at once.
var permanentErrors = []error{
	facade.ErrBadTopic,
	facade.ErrBadPayload,
	facade.ErrBadKey,
	facade.ErrKeyRequired,
	facade.ErrTooLarge,
	facade.ErrBadID,
	facade.ErrInvalidOption,
}

// IsPermanent reports whether err is a publish error that retrying cannot
// fix (it wraps [facade.ErrBadTopic], [facade.ErrBadPayload],
// [facade.ErrBadKey], [facade.ErrKeyRequired], [facade.ErrTooLarge],
// [facade.ErrBadID] or [facade.ErrInvalidOption]).
func IsPermanent(err error) bool {
	for _, p := range permanentErrors {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}

// IsUnavailable reports whether err says that the event store could not be
// reached or did not answer in time ([facade.ErrUnavailable],
// [facade.ErrClosed], context.DeadlineExceeded). Such a failure says nothing
// about the record, so the drainer does not count it as an attempt.
func IsUnavailable(err error) bool {
	return errors.Is(err, facade.ErrUnavailable) || errors.Is(err, facade.ErrClosed) ||
		errors.Is(err, context.DeadlineExceeded)
}
