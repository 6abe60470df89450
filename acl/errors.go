package acl

import (
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/pattern"
)

// Sentinel errors. They are *facade.Error values, the one coded error type
// of eventhub: errors.Is matches by code, so test with the sentinels and
// never with ==, since returned errors wrap them with more context. Error
// texts never contain a token or a secret.
var (
	// ErrBadPolicy means a Policy (or the policy/scopes carried by a token) is
	// invalid: unknown effect or action, rule without topics, bad pattern or
	// bad scope. A token carrying an invalid policy is rejected with this
	// code (fail closed).
	ErrBadPolicy = &facade.Error{Code: "bad_policy", Msg: "invalid policy"}
	// ErrBadPattern means a topic pattern is invalid (empty, empty segment, a
	// segment mixing '*' with other characters such as "a*" or "***", a ">"
	// segment, whitespace or control characters).
	ErrBadPattern = pattern.ErrBadPattern
	// ErrBadScope means a scope string is not of the form "<action>:<pattern>".
	ErrBadScope = &facade.Error{Code: "bad_scope", Msg: "invalid scope"}
)
