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
	status  Status
	topics  Topics
	events  Events
	groups  Groups
	keys    Keys
	export  ExportSource
	log     *slog.Logger
	mux     *http.ServeMux
	replays chan struct{} // semaphore of running replays
}

// handlerFunc is an endpoint: it writes its answer, or returns the error
// that [Handler.serve] answers in the JSON error shape of every ops error.
type handlerFunc func(h *Handler, w http.ResponseWriter, r *http.Request) error

// access says who may call a route.
type access int

const (
	// probe: Config.Authorize, with Config.AuthorizeProbes only.
	probe access = iota
	// read: Config.Authorize.
	read
	// admin: Config.AuthorizeAdmin, with an audit record (see [Handler.admin]).
	admin
)

// route is one endpoint. groupTopic: the route is about a group, whose
// topic may be a pattern (a group reads a topic, or a pattern over a topic
// family).
type route struct {
	pattern    string
	access     access
	groupTopic bool
	fn         handlerFunc
}

// routes are the endpoints, as ServeMux patterns: the ops endpoints, then
// the admin API (docs/http-api.md, "Admin API"). Each takes its arguments from
// the query string.
var routes = []route{
	{"GET /healthz", probe, false, (*Handler).healthz},
	{"GET /readyz", probe, false, (*Handler).readyz},
	{"GET /topics", read, false, (*Handler).listTopics},
	{"GET /cursors", read, true, (*Handler).cursors},
	{"GET /lag", read, true, (*Handler).lag},
	{"GET /latest-by-key", read, false, (*Handler).latestByKey},
	{"GET /replay", read, false, (*Handler).replay},

	{"GET /admin/groups", admin, true, (*Handler).adminGroups},
	{"POST /admin/groups/seek", admin, true, (*Handler).adminSeek},
	{"POST /admin/groups/pause", admin, true, (*Handler).adminPause},
	{"POST /admin/groups/resume", admin, true, (*Handler).adminResume},
	{"DELETE /admin/groups", admin, true, (*Handler).adminDeleteGroup},
	{"GET /admin/topics", admin, false, (*Handler).adminDescribeTopic},
	{"POST /admin/topics", admin, false, (*Handler).adminDeclareTopic},
	{"POST /admin/topics/purge", admin, false, (*Handler).adminPurge},
	{"DELETE /admin/topics", admin, false, (*Handler).adminDeleteTopic},
	{"DELETE /admin/keys", admin, false, (*Handler).adminDeleteKey},
	{"GET /admin/deadletters", admin, false, (*Handler).adminDeadLetters},
	{"POST /admin/deadletters/redrive", admin, false, (*Handler).adminRedrive},
	{"POST /admin/deadletters/discard", admin, false, (*Handler).adminDiscard},
	{"GET /admin/events", admin, false, (*Handler).adminEvent},
	{"GET /admin/events/browse", admin, false, (*Handler).adminBrowse},
	{"GET /admin/sessions", admin, false, (*Handler).adminSessions},
	{"POST /admin/sessions/disconnect", admin, false, (*Handler).adminDisconnect},
}

// AdminRoutes returns the patterns of the admin API's routes ("POST
// /admin/groups/seek" and so on), for a proxy or a check that lists them.
func AdminRoutes() []string {
	var out []string
	for _, rt := range routes {
		if rt.access == admin {
			out = append(out, rt.pattern)
		}
	}
	return out
}

// New returns a Handler for cfg, or the error of [Config.Validate].
func New(cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	h := &Handler{
		cfg:     cfg,
		status:  cfg.Bus,
		topics:  cfg.Topics,
		events:  cfg.Events,
		groups:  cfg.Groups,
		keys:    cfg.Keys,
		export:  cfg.Export,
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
// each behind Config.Authorize, the admin API behind
// Config.AuthorizeAdmin). It panics, as ServeMux does, if mux already has
// one of the patterns.
func (h *Handler) Register(mux *http.ServeMux) {
	for _, rt := range routes {
		switch {
		case rt.access == admin:
			mux.Handle(rt.pattern, h.admin(rt))
		case h.cfg.Authorize != nil && (rt.access == read || h.cfg.AuthorizeProbes):
			mux.Handle(rt.pattern, h.serve(rt.fn, func(r *http.Request) error { return h.authorize(r, rt.groupTopic) }))
		default:
			mux.Handle(rt.pattern, h.serve(rt.fn, nil))
		}
	}
}

// serve runs check (when not nil), then fn, and answers the error of
// either in the JSON error shape.
func (h *Handler) serve(fn handlerFunc, check func(*http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var err error
		if check != nil {
			err = check(r)
		}
		if err == nil {
			err = fn(h, w, r)
		}
		if err != nil {
			h.writeError(w, r, err)
		}
	}
}

// validTopic validates the topic a request names: a topic, or, when
// pattern is set (a group's topic), a pattern.
func validTopic(topic string, pattern bool) error {
	if pattern {
		return facade.ValidatePattern(topic)
	}
	return facade.ValidateTopic(topic)
}

// authorize runs Config.Authorize. A malformed topic or group is refused
// first (400 bad_topic / bad_group): an authorizer cannot judge a name that
// is not one, and 403 would suggest that it exists. pattern: the topic may
// be a pattern (see [route]).
func (h *Handler) authorize(r *http.Request, pattern bool) error {
	q := r.URL.Query()
	if q.Has("topic") {
		if err := validTopic(q.Get("topic"), pattern); err != nil {
			return err
		}
	}
	if g := q.Get("group"); g != "" {
		if err := facade.ValidateGroup(g); err != nil {
			return err
		}
	}
	return refused(h.cfg.Authorize(r))
}

// refused is an authorizer's refusal as an ops error: ErrForbidden as it
// is, anything else as ErrUnauthorized; nil when err is nil.
func refused(err error) error {
	if err != nil && !errors.Is(err, ErrForbidden) {
		return fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	return err
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
