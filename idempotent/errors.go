package idempotent

import (
	"errors"

	"github.com/eventhub/eventhub/facade"
)

// Sentinel errors of the package; test with errors.Is.
var (
	// ErrInvalidConfig: a configuration value is out of range.
	ErrInvalidConfig = errors.New("idempotent: invalid configuration")
)

// hook is called at the named stage of processing one delivery; a non-nil
// error abandons the delivery there, without settling it (tests use it to
// stand for a crash). Stages: SQL "written" (handler done, transaction not
// committed), "committed" (not acked); KV "handled" (not marked),
// "marked" (not acked).
type hook func(stage string, e *facade.EventRecord) error
