package idempotent

import "github.com/eventhub/eventhub/facade"

// SetHook installs a hook called at each stage of processing (see hook).
func (s *SQL) SetHook(h func(stage string, e *facade.EventRecord) error) { s.hook = h }

// SetHook installs a hook called at each stage of processing (see hook).
func (k *KV) SetHook(h func(stage string, e *facade.EventRecord) error) { k.hook = h }
