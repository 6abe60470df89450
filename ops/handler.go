package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/eventhub/eventhub/facade"
)

// Handler serves the ops endpoints. It is an http.Handler (routing with
// its own ServeMux); [Handler.Register] mounts the same routes on another
// mux instead. It is safe for concurrent use and starts no goroutine that
// outlives a request, so it needs no Close.
type Handler struct {
	cfg     Config
	bus     Bus
	log     *slog.Logger
	mux     *http.ServeMux
	replays chan struct{} // semaphore of running replays
}

// Routes of the ops endpoints, as ServeMux patterns.
var routes = []string{
	"GET /healthz", "GET /readyz", "GET /topics", "GET /cursors", "GET /lag",
	"GET /latest-by-key", "GET /replay",
}

// New returns a Handler for cfg, or the error of [Config.Validate].
func New(cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	h := &Handler{
		cfg:     cfg,
		bus:     cfg.Bus,
		log:     cfg.Logger,
		replays: make(chan struct{}, cfg.MaxConcurrentReplays),
	}
	h.mux = http.NewServeMux()
	h.Register(h.mux)
	h.mux.HandleFunc("/", h.NotFound)
	return h, nil
}

// ServeHTTP routes a request to its endpoint.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// NotFound answers a path that is no endpoint with the JSON not_found of
// every other ops error. A mux that Register mounted the endpoints on can
// use it as its "/" handler.
func (h *Handler) NotFound(w http.ResponseWriter, r *http.Request) {
	h.writeError(w, r, fmt.Errorf("%w: no endpoint %s", facade.ErrNotFound, r.URL.Path))
}

// Register mounts the endpoints on mux (patterns "GET /cursors" and so on,
// each behind Config.Authorize). It panics, as ServeMux does, if mux
// already has one of the patterns.
func (h *Handler) Register(mux *http.ServeMux) {
	handlers := map[string]http.HandlerFunc{
		"GET /healthz":       h.healthz,
		"GET /readyz":        h.readyz,
		"GET /topics":        h.topics,
		"GET /cursors":       h.cursors,
		"GET /lag":           h.lag,
		"GET /latest-by-key": h.latestByKey,
		"GET /replay":        h.replay,
	}
	for _, pattern := range routes {
		fn := handlers[pattern]
		probe := pattern == "GET /healthz" || pattern == "GET /readyz"
		if h.cfg.Authorize != nil && (!probe || h.cfg.AuthorizeProbes) {
			mux.Handle(pattern, h.authorized(fn, groupRoutes[pattern]))
		} else {
			mux.Handle(pattern, fn)
		}
	}
	admin := h.adminHandlers()
	for _, pattern := range adminRoutes {
		mux.Handle(pattern, h.admin(admin[pattern], groupRoutes[pattern]))
	}
}

// groupRoutes are the routes about a group, whose topic may be a pattern:
// a group reads a topic, or a pattern over a topic family.
var groupRoutes = map[string]bool{
	"GET /cursors": true, "GET /lag": true,
	"GET /admin/groups": true, "POST /admin/groups/seek": true, "POST /admin/groups/pause": true,
	"POST /admin/groups/resume": true, "DELETE /admin/groups": true,
}

// validTopic validates the topic a request names: a topic, or, when
// pattern is set (a group's topic), a pattern.
func validTopic(topic string, pattern bool) error {
	if pattern {
		return facade.ValidatePattern(topic)
	}
	return facade.ValidateTopic(topic)
}

// authorized runs Config.Authorize before next. A malformed topic or group
// is refused first (400 bad_topic / bad_group): an authorizer cannot judge
// a name that is not one, and 403 would suggest that it exists. pattern:
// the topic may be a pattern (see groupRoutes).
func (h *Handler) authorized(next http.Handler, pattern bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Has("topic") {
			if err := validTopic(q.Get("topic"), pattern); err != nil {
				h.writeError(w, r, err)
				return
			}
		}
		if g := q.Get("group"); g != "" {
			if err := facade.ValidateGroup(g); err != nil {
				h.writeError(w, r, err)
				return
			}
		}
		if err := h.cfg.Authorize(r); err != nil {
			if !errors.Is(err, ErrForbidden) {
				err = fmt.Errorf("%w: %w", ErrUnauthorized, err)
			}
			h.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requestContext bounds a JSON endpoint's JetStream calls.
func (h *Handler) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
}

// msTime converts a time to epoch milliseconds, 0 for the zero time.
func msTime(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
