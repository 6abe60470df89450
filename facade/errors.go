package facade

import (
	"errors"
	"strings"
	"time"
)

// Error is an error with a stable code, the code that WebSocket ERR frames and
// HTTP error bodies carry. Two Errors match under errors.Is when their codes
// are equal, so callers test with the sentinels below.
type Error struct {
	Code string
	Msg  string
	// RetryAfter, on ErrRateLimited, is how long to wait before the same
	// request would be admitted; zero otherwise.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return e.Code
	}
	return e.Code + ": " + e.Msg
}

// Detail is the text of err, which wraps fe, without fe's own "code: msg"
// (the code travels on its own, in an ERR frame or a JSON error): for
// fmt.Errorf("from: %w: position %q", ErrInvalidOption, p) it is
// `from: position "…"`, not `from: bad_request: invalid option: …`. A bare
// fe gives its Msg.
func Detail(err error, fe *Error) string {
	s := err.Error()
	if s == fe.Error() {
		return fe.Msg
	}
	full := fe.Error() + ": "
	if i := strings.Index(s, full); i >= 0 {
		return s[:i] + s[i+len(full):]
	}
	return strings.TrimPrefix(s, fe.Code+": ")
}

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// Sentinel errors. Implementations wrap them (with %w) so that errors.Is works
// and the wire code is preserved.
var (
	// ErrBadTopic: the topic name is not valid (see [ValidateTopic]).
	ErrBadTopic = &Error{Code: "bad_topic", Msg: "invalid topic"}
	// ErrBadGroup: the group name is not valid (see [ValidateGroup]).
	ErrBadGroup = &Error{Code: "bad_group", Msg: "invalid group"}
	// ErrBadPayload: the payload is not a single valid JSON value.
	ErrBadPayload = &Error{Code: "bad_payload", Msg: "payload is not valid JSON"}
	// ErrBadKey: the key is too long or not valid UTF-8.
	ErrBadKey = &Error{Code: "bad_key", Msg: "invalid key"}
	// ErrBadID: an event id is empty, longer than 128 bytes or not printable
	// ASCII. Ids should be uuidv7 (what NewID makes): only those can be found
	// by time (afterId, SetCursor by id).
	ErrBadID = &Error{Code: "bad_id", Msg: "invalid event id"}
	// ErrInvalidOption: a publish or subscribe option is out of range.
	ErrInvalidOption = &Error{Code: "bad_request", Msg: "invalid option"}
	// ErrConflictingOption: a subscribe option that a group holds for all
	// its members (its retry policy, its order) differs from the group's.
	ErrConflictingOption = &Error{Code: "conflicting_option", Msg: "option conflicts with the group's"}
	// ErrKeyRequired: the topic is compacted and the event has no key.
	ErrKeyRequired = &Error{Code: "key_required", Msg: "compacted topic needs a key"}
	// ErrUnknownID: no event with that id was found (afterId, SetCursor).
	ErrUnknownID = &Error{Code: "unknown_id", Msg: "unknown event id"}
	// ErrNotFound: the topic or group does not exist.
	ErrNotFound = &Error{Code: "not_found", Msg: "not found"}
	// ErrWrongLastSeq: a compare-and-set publish or delete
	// (PublishOptions.ExpectedLastSeq) found the key's newest event at
	// another position than the one expected: someone else wrote the key
	// since it was read. Read it again and retry.
	ErrWrongLastSeq = &Error{Code: "wrong_last_seq", Msg: "the key's last position moved"}
	// ErrSettled: the delivery was already acknowledged or nacked.
	ErrSettled = &Error{Code: "settled", Msg: "delivery already settled"}
	// ErrExpired: the delivery's deadline passed and its event was handed
	// back to the group.
	ErrExpired = &Error{Code: "expired", Msg: "delivery expired"}
	// ErrForbidden: the principal may not do this (over a remote
	// connection: its credentials no longer allow a subscription).
	ErrForbidden = &Error{Code: "forbidden", Msg: "forbidden"}
	// ErrTooLarge: the payload exceeds the server's maximum.
	ErrTooLarge = &Error{Code: "too_large", Msg: "payload too large"}
	// ErrLimitExceeded: a limit of the store refuses the request (the
	// maximum groups of a topic, streams of the account, events or bytes
	// of a stream that discards new events). Retrying does not help until
	// an operator raises the limit or frees room.
	ErrLimitExceeded = &Error{Code: "limit_exceeded", Msg: "limit exceeded"}
	// ErrStorageFull: the store has no storage (disk or memory) left for
	// the request.
	ErrStorageFull = &Error{Code: "storage_full", Msg: "storage full"}
	// ErrUnavailable: the server could not be reached in time.
	ErrUnavailable = &Error{Code: "unavailable", Msg: "event store unavailable"}
	// ErrClosed: the bus or subscription is closed.
	ErrClosed = &Error{Code: "closed", Msg: "closed"}

	// ErrRateLimited: the principal or the topic is over its rate limit;
	// the returned *Error's RetryAfter says when the request would pass.
	ErrRateLimited = &Error{Code: "rate_limited", Msg: "rate limited"}
	// ErrTopicQuota: the principal created as many topics as it may.
	ErrTopicQuota = &Error{Code: "topic_quota", Msg: "topic quota reached"}
	// ErrGroupQuota: the principal created as many groups as it may.
	ErrGroupQuota = &Error{Code: "group_quota", Msg: "group quota reached"}
	// ErrSubscriptionQuota: the principal holds as many subscriptions as
	// it may.
	ErrSubscriptionQuota = &Error{Code: "subscription_quota", Msg: "subscription quota reached"}
	// ErrConnectionQuota: the principal, or the address it connects from,
	// holds as many connections as it may.
	ErrConnectionQuota = &Error{Code: "connection_quota", Msg: "connection quota reached"}
)

// RetryAfter returns how long err asks the caller to wait before retrying
// (an ErrRateLimited), and whether it asks at all.
func RetryAfter(err error) (time.Duration, bool) {
	var fe *Error
	if errors.As(err, &fe) && fe.Code == ErrRateLimited.Code {
		return fe.RetryAfter, true
	}
	return 0, false
}
