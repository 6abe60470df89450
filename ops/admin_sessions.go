package ops

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/inspect"
)

// adminSessions lists the WebSocket sessions of the hub's gateway.
func (h *Handler) adminSessions(w http.ResponseWriter, r *http.Request) error {
	sessions := []inspect.SessionInfo{}
	if h.cfg.Sessions != nil {
		sessions = h.cfg.Sessions.Sessions()
	}
	writeJSON(w, http.StatusOK, map[string]any{"gateway": h.cfg.Sessions != nil, "sessions": sessions})
	return nil
}

// adminDisconnect closes session ?id= (close code 4004, disconnected).
func (h *Handler) adminDisconnect(w http.ResponseWriter, r *http.Request) error {
	s, err := param(r, "id")
	if err != nil {
		return err
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: id %q: want a session id from GET /admin/sessions", ErrBadRequest, s)
	}
	if h.cfg.Sessions == nil || !h.cfg.Sessions.Disconnect(id) {
		return fmt.Errorf("%w: no session %d", facade.ErrNotFound, id)
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "disconnected": true})
	return nil
}
