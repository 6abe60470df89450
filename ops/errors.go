package ops

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/eventhub/eventhub/facade"
)

// Error codes of the ops endpoints' own errors. Errors of the bus keep the
// facade's codes (bad_topic, bad_group, bad_key, unknown_id, not_found,
// unavailable, closed).
const (
	CodeBadRequest      = "bad_request"
	CodeNotFound        = "not_found"
	CodeUnauthorized    = "unauthorized"
	CodeForbidden       = "forbidden"
	CodeTooManyRequests = "too_many_requests"
	CodeUnavailable     = "unavailable"
	CodeInternal        = "internal"
)

// Sentinels for the ops endpoints' own error codes; like the facade's, they
// are *facade.Error values matched by code under errors.Is.
var (
	// ErrBadRequest: a missing or malformed query parameter.
	ErrBadRequest = &facade.Error{Code: CodeBadRequest, Msg: "bad request"}
	// ErrUnauthorized: Config.Authorize refused the request.
	ErrUnauthorized = &facade.Error{Code: CodeUnauthorized, Msg: "unauthorized"}
	// ErrForbidden: return it (wrapped) from Config.Authorize to answer 403.
	ErrForbidden = &facade.Error{Code: CodeForbidden, Msg: "forbidden"}
	// ErrTooManyRequests: MaxConcurrentReplays replays are running.
	ErrTooManyRequests = &facade.Error{Code: CodeTooManyRequests, Msg: "too many replays running"}
)

// statusOf maps an error code to the HTTP status the endpoints answer.
func statusOf(code string) int {
	switch code {
	case CodeBadRequest, "bad_topic", "bad_group", "bad_key", "bad_id":
		return http.StatusBadRequest
	case CodeNotFound, "unknown_id":
		return http.StatusNotFound
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeTooManyRequests:
		return http.StatusTooManyRequests
	case "not_own_stream":
		return http.StatusConflict
	case CodeUnavailable, "closed":
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// wireError returns the code and message an error is reported with.
func wireError(err error) (code, msg string) {
	var fe *facade.Error
	switch {
	case errors.As(err, &fe):
		return fe.Code, facade.Detail(err, fe)
	case errors.Is(err, context.DeadlineExceeded):
		return CodeUnavailable, err.Error()
	}
	return CodeInternal, err.Error()
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code string `json:"code"`
	Msg  string `json:"msg"`
}

// writeError answers err as {"error":{"code":...,"msg":...}} with the
// code's status.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := wireError(err)
	status := statusOf(code)
	if status >= 500 {
		h.log.Warn("ops request failed", "path", r.URL.Path, "code", code, "err", err)
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="eventhub-ops"`)
	}
	writeJSON(w, status, errorBody{errorDetail{Code: code, Msg: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","msg":"encoding the answer failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
