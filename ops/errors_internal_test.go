package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/wire"
)

// The ops endpoints answer every error with the code and status of the one
// table every way in uses, context cancellation included.
func TestErrorStatusIsTheWireTable(t *testing.T) {
	h := &Handler{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, c := range []struct {
		err    error
		code   string
		status int
	}{
		{fmt.Errorf("%w: q", ErrBadRequest), CodeBadRequest, http.StatusBadRequest},
		{facade.ErrBadTopic, "bad_topic", http.StatusBadRequest},
		{facade.ErrUnknownID, "unknown_id", http.StatusNotFound},
		{ErrTooManyRequests, CodeTooManyRequests, http.StatusTooManyRequests},
		{&facade.Error{Code: wire.CodeNotOwnStream, Msg: "shared"}, wire.CodeNotOwnStream, http.StatusConflict},
		{facade.ErrTooLarge, "too_large", http.StatusRequestEntityTooLarge},
		{context.DeadlineExceeded, CodeUnavailable, http.StatusServiceUnavailable},
		{fmt.Errorf("list: %w", context.Canceled), "closed", http.StatusServiceUnavailable},
		{facade.ErrClosed, "closed", http.StatusServiceUnavailable},
		{fmt.Errorf("boom"), CodeInternal, http.StatusInternalServerError},
	} {
		rec := httptest.NewRecorder()
		h.writeError(rec, httptest.NewRequest(http.MethodGet, "/x", nil), c.err)
		var body errorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%v: %v", c.err, err)
		}
		if rec.Code != c.status || body.Error.Code != c.code || rec.Code != wire.HTTPStatus(body.Error.Code) {
			t.Errorf("%v: %d %s, want %d %s", c.err, rec.Code, body.Error.Code, c.status, c.code)
		}
	}
}
