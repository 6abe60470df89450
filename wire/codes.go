package wire

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/eventhub/eventhub/facade"
)

// Error codes and close codes.
//
// Every error the gateway reports carries one code from [Codes]: in an ERR
// frame ({"op":"ERR","code":...}), in the body of an HTTP error
// ({"error":{"code":...}}), and as the reason of a close frame when the
// gateway ends a connection. The table says, per code, whether the
// connection stays open and which HTTP status the publish endpoint uses.
//
// Close codes the gateway sends:
//
//   - 1000 normal closure; 1001 going away (the gateway shuts down:
//     reconnect to another instance or later); 1009 a frame above the
//     hard size limit (four times MaxFrameBytes).
//   - 4000–4499: the gateway ended the session for a reason that a new
//     connection can recover from. Reconnect with backoff; events that
//     were in flight were handed back and will be redelivered.
//   - 4500–4999: do not reconnect without changing something: the
//     credentials were refused or expired, or a connection quota is full.
//
// Codes below 4000 other than these come from the WebSocket library.
const (
	CloseNormal        = 1000
	CloseGoingAway     = 1001
	CloseMessageTooBig = 1009

	CloseServerError  = 4000 // a recovered internal fault
	CloseSlowClient   = 4001 // outbound queue full or write timed out
	CloseIdle         = 4002 // nothing received within IdleTimeout
	CloseAuthTimeout  = 4003 // no AUTH within AuthTimeout
	CloseDisconnected = 4004 // an operator disconnected the session
	CloseBadToken     = 4500 // AUTH refused
	CloseTokenExpired = 4501 // the principal's credentials expired
	CloseQuota        = 4502 // a connection quota refused the connection
)

// CodeInfo describes one error code.
type CodeInfo struct {
	// Code is the stable wire code.
	Code string
	// Meaning says when the gateway uses it.
	Meaning string
	// Close is the close code the gateway ends the connection with after
	// reporting this code; 0 when the connection stays open.
	Close int
	// ERR is false for codes that are only a close reason (no ERR frame
	// can be sent, or none is useful), and for codes only the HTTP
	// endpoints answer (Close 0).
	ERR bool
	// HTTPStatus is the status the HTTP endpoints (publish, ops, admin)
	// answer for this code; 0 when none of them produces it.
	HTTPStatus int
}

// Error codes, in the order of [Codes].
const (
	CodeBadJSON           = "bad_json"
	CodeBadFrame          = "bad_frame"
	CodeUnknownOp         = "unknown_op"
	CodeFrameTooLarge     = "frame_too_large"
	CodeUnauthorized      = "unauthorized"
	CodeBadToken          = "bad_token"
	CodeTokenExpired      = "token_expired"
	CodeAuthTimeout       = "auth_timeout"
	CodeForbidden         = "forbidden"
	CodeBadRequest        = "bad_request"
	CodeBadTopic          = "bad_topic"
	CodeBadGroup          = "bad_group"
	CodeBadPayload        = "bad_payload"
	CodeBadKey            = "bad_key"
	CodeBadID             = "bad_id"
	CodeKeyRequired       = "key_required"
	CodeConflictingOption = "conflicting_option"
	CodeWrongLastSeq      = "wrong_last_seq"
	CodeTooLarge          = "too_large"
	CodeAlreadySubscribed = "already_subscribed"
	CodeNotSubscribed     = "not_subscribed"
	CodeUnknownID         = "unknown_id"
	CodeNotFound          = "not_found"
	CodeMethodNotAllowed  = "method_not_allowed"
	CodeUnsupported       = "unsupported"
	CodeLimitExceeded     = "limit_exceeded"
	CodeStorageFull       = "storage_full"
	CodeRateLimited       = "rate_limited"
	CodeTopicQuota        = "topic_quota"
	CodeGroupQuota        = "group_quota"
	CodeSubQuota          = "subscription_quota"
	CodeConnQuota         = "connection_quota"
	CodePublishFailed     = "publish_failed"
	CodeUnavailable       = "unavailable"
	CodeClosed            = "closed"
	CodeInternal          = "internal"
	CodeServerError       = "server_error"
	CodeSlowClient        = "slow_client"
	CodeIdle              = "idle_timeout"
	CodeGoingAway         = "going_away"
	CodeDisconnected      = "disconnected"
	CodeTooManyRequests   = "too_many_requests"
	CodeNotOwnStream      = "not_own_stream"
)

// codes is the table of every error code, read only. docs/protocol.md
// renders it (see [CodesMarkdown]); a test keeps the two equal.
var codes = []CodeInfo{
	{CodeBadJSON, "The frame is not valid JSON.", 0, true, 0},
	{CodeBadFrame, "Valid JSON of the wrong shape: not an object, no op, a field of the wrong type, a duplicate key or one whose case differs from the field name, a binary frame.", 0, true, 0},
	{CodeUnknownOp, "The op is not one a client may send.", 0, true, 0},
	{CodeFrameTooLarge, "The frame exceeds MaxFrameBytes; it was discarded.", 0, true, 0},
	{CodeUnauthorized, "A frame other than AUTH before a successful AUTH; HTTP: no bearer token.", 0, true, http.StatusUnauthorized},
	{CodeBadToken, "The token was refused.", CloseBadToken, true, http.StatusUnauthorized},
	{CodeTokenExpired, "The principal's credentials expired during the session.", CloseTokenExpired, true, 0},
	{CodeAuthTimeout, "No AUTH within AuthTimeout of connecting.", CloseAuthTimeout, true, 0},
	{CodeForbidden, "The principal may not publish to / subscribe to this topic (and group); HTTP: origin not allowed.", 0, true, http.StatusForbidden},
	{CodeBadRequest, "A missing or invalid field or option (ids, extend_ms, opts out of range, a negative ts); a field that is not valid UTF-8 (corr, group, …).", 0, true, http.StatusBadRequest},
	{CodeBadTopic, "The topic name is not valid, or a group's pattern is not over one topic family.", 0, true, http.StatusBadRequest},
	{CodeBadGroup, "The group name is not valid.", 0, true, http.StatusBadRequest},
	{CodeBadPayload, "The payload is missing, not a single JSON value, or not valid UTF-8.", 0, true, http.StatusBadRequest},
	{CodeBadKey, "The key is too long, not UTF-8, or the topic's stream does not capture keys.", 0, true, http.StatusBadRequest},
	{CodeBadID, "The event id is not acceptable.", 0, true, http.StatusBadRequest},
	{CodeKeyRequired, "The topic is compacted and the event has no key.", 0, true, http.StatusBadRequest},
	{CodeConflictingOption, "A SUBSCRIBE option that a group holds for all its members (retry, orderBy) differs from the group's: subscribe with the group's, or without it.", 0, true, 0},
	{CodeWrongLastSeq, "A compare-and-set publish or delete (expected_last_seq) found the key's newest event at another position: the key was written since it was read. Read it again and retry.", 0, true, http.StatusConflict},
	{CodeTooLarge, "The payload exceeds the store's or the endpoint's maximum.", 0, true, http.StatusRequestEntityTooLarge},
	{CodeAlreadySubscribed, "This connection already subscribes to this topic and group.", 0, true, 0},
	{CodeNotSubscribed, "This connection has no subscription of this topic and group.", 0, true, 0},
	{CodeUnknownID, "ACK/NACK/MODACK of an id not in flight on this subscription: never delivered, already settled, lease expired, or attempt mismatch; also afterId / SEEK lastId not found.", 0, true, http.StatusNotFound},
	{CodeNotFound, "The topic or group does not exist (CURSOR); HTTP: no endpoint has this path.", 0, true, http.StatusNotFound},
	{CodeMethodNotAllowed, "HTTP: the endpoint does not take this method; the Allow header lists those it takes.", 0, false, http.StatusMethodNotAllowed},
	{CodeUnsupported, "The bus behind the gateway lacks the capability (live subscriptions, snapshots).", 0, true, http.StatusNotImplemented},
	{CodeLimitExceeded, "A limit of the store refuses the request (the maximum groups of a topic, streams, a stream's events or bytes); retrying does not help until an operator raises it.", 0, true, http.StatusConflict},
	{CodeStorageFull, "The store has no storage left; retrying does not help until room is freed.", 0, true, http.StatusInsufficientStorage},
	{CodeRateLimited, "The principal or the topic is over its rate limit (events/s or bytes/s). Retry after retry_after_ms (HTTP: the Retry-After header, in seconds, and Eventhub-Retry-After-Ms).", 0, true, http.StatusTooManyRequests},
	{CodeTopicQuota, "The principal created as many topics as its quota allows (on every hub together); the publish or subscribe that would create another is refused. Retrying does not help.", 0, true, http.StatusConflict},
	{CodeGroupQuota, "The principal created as many groups as its quota allows (on every hub together). Retrying does not help.", 0, true, 0},
	{CodeSubQuota, "The principal holds as many subscriptions on this hub as its quota allows; end one first.", 0, true, http.StatusTooManyRequests},
	{CodeConnQuota, "The principal, or the client address, holds as many connections (WebSocket and event streams) on this hub as its quota allows.", CloseQuota, true, http.StatusTooManyRequests},
	{CodePublishFailed, "The store failed the publish.", 0, true, http.StatusBadGateway},
	{CodeUnavailable, "The store did not answer in time.", 0, true, http.StatusServiceUnavailable},
	{CodeClosed, "The gateway or the bus is shutting down.", 0, true, http.StatusServiceUnavailable},
	{CodeInternal, "An unexpected error; the request may be retried.", 0, true, http.StatusInternalServerError},
	{CodeServerError, "The session hit an internal fault and was ended; its in-flight events were handed back.", CloseServerError, true, 0},
	{CodeSlowClient, "The client did not read fast enough: its outbound queue filled up or a write timed out.", CloseSlowClient, false, 0},
	{CodeIdle, "Nothing, not even a pong, was received within IdleTimeout.", CloseIdle, false, 0},
	{CodeDisconnected, "An operator disconnected the session (admin API); in-flight events were handed back.", CloseDisconnected, false, 0},
	{CodeGoingAway, "The gateway is shutting down; in-flight events were handed back.", CloseGoingAway, false, 0},
	{CodeTooManyRequests, "Ops endpoints: as many replays or exports run as MaxConcurrentReplays allows; retry later.", 0, false, http.StatusTooManyRequests},
	{CodeNotOwnStream, "Admin API: the topic's stream is shared with other topics or was made outside the hub, and the change would touch what they hold.", 0, false, http.StatusConflict},
}

var codeIndex = func() map[string]*CodeInfo {
	m := make(map[string]*CodeInfo, len(codes))
	for i := range codes {
		m[codes[i].Code] = &codes[i]
	}
	return m
}()

// Codes returns a copy of the table of every error code, in a stable
// order. It is safe for concurrent use.
func Codes() []CodeInfo { return slices.Clone(codes) }

// LookupCode returns the table entry of code.
func LookupCode(code string) (CodeInfo, bool) {
	ci, ok := codeIndex[code]
	if !ok {
		return CodeInfo{}, false
	}
	return *ci, true
}

// Sentinel errors of the gateway's own codes. Like the facade's sentinels
// they are *facade.Error values, matched by code under errors.Is.
var (
	ErrBadJSON           = &facade.Error{Code: CodeBadJSON, Msg: "frame is not valid JSON"}
	ErrBadFrame          = &facade.Error{Code: CodeBadFrame, Msg: "malformed frame"}
	ErrUnknownOp         = &facade.Error{Code: CodeUnknownOp, Msg: "unknown op"}
	ErrFrameTooLarge     = &facade.Error{Code: CodeFrameTooLarge, Msg: "frame too large"}
	ErrUnauthorized      = &facade.Error{Code: CodeUnauthorized, Msg: "authenticate first"}
	ErrBadToken          = &facade.Error{Code: CodeBadToken, Msg: "authentication failed"}
	ErrTokenExpired      = &facade.Error{Code: CodeTokenExpired, Msg: "credentials expired"}
	ErrAuthTimeout       = &facade.Error{Code: CodeAuthTimeout, Msg: "no AUTH in time"}
	ErrForbidden         = &facade.Error{Code: CodeForbidden, Msg: "forbidden"}
	ErrAlreadySubscribed = &facade.Error{Code: CodeAlreadySubscribed, Msg: "already subscribed"}
	ErrUnsupported       = &facade.Error{Code: CodeUnsupported, Msg: "not supported by this bus"}
	ErrMethodNotAllowed  = &facade.Error{Code: CodeMethodNotAllowed, Msg: "method not allowed"}
	ErrNotSubscribed     = &facade.Error{Code: CodeNotSubscribed, Msg: "not subscribed"}
	ErrPublishFailed     = &facade.Error{Code: CodePublishFailed, Msg: "publish failed"}
	ErrInternal          = &facade.Error{Code: CodeInternal, Msg: "internal error"}
	ErrServerError       = &facade.Error{Code: CodeServerError, Msg: "internal fault"}
	ErrSlowClient        = &facade.Error{Code: CodeSlowClient, Msg: "client too slow"}
	ErrIdle              = &facade.Error{Code: CodeIdle, Msg: "idle timeout"}
	ErrGoingAway         = &facade.Error{Code: CodeGoingAway, Msg: "gateway shutting down"}
)

// Errorf returns a *facade.Error with code and a formatted message.
func Errorf(code, format string, args ...any) *facade.Error {
	return &facade.Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// FromError turns any error into the code and message an ERR frame or HTTP
// error carries. Errors that carry a known code (facade sentinels and the
// gateway's own) keep it; context errors become unavailable; anything else
// becomes fallback.
func FromError(err error, fallback string) (code, msg string) {
	var fe *facade.Error
	if errors.As(err, &fe) {
		if _, ok := codeIndex[fe.Code]; ok {
			return fe.Code, facade.Detail(err, fe)
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return CodeUnavailable, err.Error()
	case errors.Is(err, context.Canceled):
		return CodeClosed, err.Error()
	}
	return fallback, err.Error()
}

// HTTPStatus is the HTTP status of an error with code: the table's, or 500
// for a code that has none.
func HTTPStatus(code string) int {
	if ci, ok := codeIndex[code]; ok && ci.HTTPStatus != 0 {
		return ci.HTTPStatus
	}
	return http.StatusInternalServerError
}

// CodesMarkdown renders [Codes] as the Markdown table of docs/protocol.md.
func CodesMarkdown() string {
	var b strings.Builder
	b.WriteString("| code | meaning | sent as | connection | HTTP status |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, c := range codes {
		sent := "ERR"
		switch {
		case !c.ERR && c.Close == 0:
			sent = "HTTP only"
		case !c.ERR:
			sent = "close reason only"
		case c.Close != 0:
			sent = "ERR, then close"
		}
		conn := "stays open"
		if c.Close != 0 {
			conn = "closed, " + strconv.Itoa(c.Close)
		}
		status := "–"
		if c.HTTPStatus != 0 {
			status = strconv.Itoa(c.HTTPStatus)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", c.Code, c.Meaning, sent, conn, status)
	}
	return b.String()
}
