package ops

import (
	"encoding/json"
	"net/http"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/wire"
)

// Error codes of the ops endpoints' own errors. Errors of the bus keep the
// facade's codes (bad_topic, bad_group, bad_key, unknown_id, not_found,
// unavailable, closed). Every code, and its HTTP status, is in the one table
// of [wire.Codes].
const (
	CodeBadRequest      = wire.CodeBadRequest
	CodeNotFound        = wire.CodeNotFound
	CodeUnauthorized    = wire.CodeUnauthorized
	CodeForbidden       = wire.CodeForbidden
	CodeTooManyRequests = wire.CodeTooManyRequests
	CodeUnavailable     = wire.CodeUnavailable
	CodeInternal        = wire.CodeInternal
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

// wireError returns the code and message an error is reported with: the
// same as on every other way in ([wire.FromError]).
func wireError(err error) (code, msg string) { return wire.FromError(err, CodeInternal) }

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
	status := wire.HTTPStatus(code)
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
