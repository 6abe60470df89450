package ops

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/inspect"
)

// SessionDirectory lists the WebSocket sessions of a gateway and
// disconnects one; the gateway implements it.
type SessionDirectory interface {
	Sessions() []inspect.SessionInfo
	Disconnect(id uint64) bool
}

// Bounds of the admin API's pages and batch actions.
const (
	defaultPage = 50
	maxPage     = 500
	// maxScan bounds the messages one browse or dead-letter request reads
	// (a filter that matches rarely gets a page with fewer events and a
	// next position to go on from).
	maxScan = 10_000
	// maxBatch bounds the dead letters one redrive or discard handles;
	// the answer says where to go on.
	maxBatchAction = 1000
)

// statusWriter records the status an admin handler answered, for the
// audit log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// admin authorizes an admin request (Config.AuthorizeAdmin), validates its
// topic (a pattern too, for a group route: see [route]) and group,
// runs it, and writes one audit record: who, what, with which arguments,
// and the answer's status (reads at debug level, actions at info, refusals
// at warn).
func (h *Handler) admin(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		principal, err := h.adminPrincipal(r)
		if err == nil {
			err = sameSite(r)
		}
		if err == nil {
			err = validNames(r, rt.groupTopic)
		}
		if err == nil {
			fr := r
			if h.cfg.BindPrincipal != nil {
				fr = r.WithContext(h.cfg.BindPrincipal(r.Context(), principal))
			}
			err = rt.fn(h, sw, fr)
		}
		if err != nil {
			h.writeError(sw, r, err)
		}
		status := cmpStatus(sw.status)
		attrs := []any{"principal", principal, "method", r.Method, "path", r.URL.Path,
			"query", redactedQuery(r.URL), "status", status, "remote", r.RemoteAddr}
		switch {
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			h.log.Warn("admin call refused", attrs...)
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			// Reads (the console polls them every few seconds) change
			// nothing: debug, so that actions stand out at info.
			h.log.Debug("admin call", attrs...)
		default:
			h.log.Info("admin call", attrs...)
		}
	})
}

func cmpStatus(s int) int {
	if s == 0 {
		return http.StatusOK
	}
	return s
}

// adminPrincipal returns who makes an admin request, or why it is refused.
func (h *Handler) adminPrincipal(r *http.Request) (string, error) {
	switch {
	case h.cfg.AuthorizeAdmin != nil:
		p, err := h.cfg.AuthorizeAdmin(r)
		return p, refused(err)
	case h.cfg.Authorize != nil:
		return "", fmt.Errorf("%w: the admin API is not enabled on this handler (no Config.AuthorizeAdmin)", ErrForbidden)
	}
	return "anonymous", nil
}

// redactedQuery is u's query for the audit log, with the value of any
// parameter that could carry a credential (a token passed the way an
// EventSource must pass it) replaced: secrets never land in logs.
func redactedQuery(u *url.URL) string {
	q := u.Query()
	redacted := false
	for k := range q {
		switch strings.ToLower(k) {
		case "access_token", "token", "auth", "authorization", "password":
			q[k] = []string{"REDACTED"}
			redacted = true
		}
	}
	if !redacted {
		return u.RawQuery
	}
	return q.Encode()
}

// sameSite refuses an admin action (anything but GET and HEAD) sent by a
// page of another site: its arguments are in the query, so a cross-site
// form or fetch needs no preflight, and with authentication off (loopback)
// any page the operator visits could purge or redrive. Browsers say where a
// request comes from (Sec-Fetch-Site, Origin); curl and scripts send
// neither and are not affected.
func sameSite(r *http.Request) error {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return fmt.Errorf("%w: admin action from another site (Sec-Fetch-Site %s)", ErrForbidden, site)
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return fmt.Errorf("%w: admin action from another origin (%s)", ErrForbidden, o)
		}
	}
	return nil
}

// validNames refuses a malformed topic or group before anything else;
// pattern: the topic may be a pattern.
func validNames(r *http.Request, pattern bool) error {
	q := r.URL.Query()
	if q.Has("topic") {
		if err := validTopic(q.Get("topic"), pattern); err != nil {
			return err
		}
	}
	if q.Has("group") {
		if err := facade.ValidateGroup(q.Get("group")); err != nil {
			return err
		}
	}
	return nil
}

// intParam reads an optional integer parameter in [lo, hi], def when absent.
func intParam(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%w: %s %q: want a number from %d to %d", ErrBadRequest, name, s, lo, hi)
	}
	return n, nil
}

// seqParam reads an optional stream sequence (>= 1); 0 when absent.
func seqParam(r *http.Request, name string) (uint64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%w: %s %q: want a stream sequence (a number >= 1)", ErrBadRequest, name, s)
	}
	return n, nil
}

func boolParam(r *http.Request, name string) (bool, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("%w: %s %q: want true or false", ErrBadRequest, name, s)
	}
	return b, nil
}

// topicGroup resolves the topic (or pattern) and group a group action
// names.
func (h *Handler) topicGroup(ctx context.Context, r *http.Request) (*inspect.Topic, string, error) {
	ti, err := h.lookupGroupTopic(ctx, r)
	if err != nil {
		return nil, "", err
	}
	group, err := param(r, "group")
	if err != nil {
		return nil, "", err
	}
	return ti, group, nil
}
