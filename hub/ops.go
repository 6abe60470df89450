package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/eventhub/eventhub/acl"
	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/limits"
	"github.com/eventhub/eventhub/ops"
)

// opsHandler serves the ops port: /metrics, the ops endpoints and replay
// (package ops), /healthz and /readyz. With auth on, everything but the
// probes needs a bearer token.
func (h *Hub) opsHandler() (http.Handler, error) {
	mux := http.NewServeMux()
	// Metrics name every topic and group: with auth on they need an
	// operator token (the static token, or the admin or metrics scope).
	mux.Handle("GET /metrics", h.requireScope(auth.ScopeMetrics, promhttp.HandlerFor(h.Registry, promhttp.HandlerOpts{})))
	o := h.cfg.Ops
	oc := ops.Config{
		Bus: h.Bus.Admin(), Durability: h.durability(), Logger: h.log.With("component", "ops"),
		RequestTimeout: o.RequestTimeout, ReadyTimeout: o.ReadyTimeout, FlushEvery: o.FlushEvery,
		ReplayBufferBytes: o.ReplayBufferBytes, ReplayWriteTimeout: o.ReplayWriteTimeout,
		MaxConcurrentReplays: o.MaxConcurrentReplays,
	}
	if h.Auth.Configured() {
		oc.Authorize = func(r *http.Request) error {
			tok, ok := bearer(r)
			if !ok {
				h.Metrics.AuthFailure("ops", "no_token")
				return errors.New("a bearer token is required")
			}
			id, err := h.Auth.Authenticate(r.Context(), tok)
			if err != nil {
				h.Metrics.AuthFailure("ops", "bad_token")
				return err
			}
			// A request about one topic (replay, lag, cursors, latest by
			// key) needs the right to subscribe to it, and to the group
			// when one is named; listings (/topics) need a valid token.
			q := r.URL.Query()
			if topic := q.Get("topic"); topic != "" && !id.Allow(string(acl.ActionSubscribe), topic, q.Get("group")) {
				h.Metrics.AuthFailure("ops", "forbidden")
				return fmt.Errorf("%w: no subscribe permission on %s", ops.ErrForbidden, topic)
			}
			return nil
		}
		// /topics lists what the token may subscribe to (in any group).
		oc.Visible = func(r *http.Request) func(string) bool {
			var id *auth.Identity
			if tok, ok := bearer(r); ok {
				id, _ = h.Auth.Authenticate(r.Context(), tok)
			}
			return func(topic string) bool {
				return id != nil && id.Allow(string(acl.ActionSubscribe), topic, "")
			}
		}
	}
	if h.gateway != nil {
		oc.Sessions = h.gateway
	}
	if h.Auth.Configured() {
		// The admin API needs the admin scope (or the static token).
		oc.AuthorizeAdmin = func(r *http.Request) (string, error) {
			tok, ok := bearer(r)
			if !ok {
				h.Metrics.AuthFailure("ops", "no_token")
				return "", errors.New("a bearer token is required")
			}
			id, err := h.Auth.Authenticate(r.Context(), tok)
			if err != nil {
				h.Metrics.AuthFailure("ops", "bad_token")
				return "", err
			}
			if !id.HasScope(auth.ScopeAdmin) {
				h.Metrics.AuthFailure("ops", "forbidden")
				return id.Name(), fmt.Errorf("%w: the admin API needs a token with the %s scope", ops.ErrForbidden, auth.ScopeAdmin)
			}
			return id.Name(), nil
		}
	}
	if h.limiter != nil {
		// A topic an admin call declares counts against its principal's
		// topic quota, as one a publish creates does.
		oc.BindPrincipal = func(ctx context.Context, principal string) context.Context {
			return limits.WithPrincipal(ctx, principal)
		}
	}
	oh, err := ops.New(oc)
	if err != nil {
		return nil, err
	}
	oh.Register(mux)
	mux.HandleFunc("/", oh.NotFound)
	return mux, nil
}

// requireScope admits, when auth is on, requests whose bearer token holds
// scope or the admin scope: 401 without a valid token, 403 without the
// scope.
func (h *Hub) requireScope(scope string, next http.Handler) http.Handler {
	if !h.Auth.Configured() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		tok, ok := bearer(r)
		if !ok {
			h.Metrics.AuthFailure("ops", "unauthorized")
			w.Header().Set("WWW-Authenticate", `Bearer realm="eventhub"`)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","msg":"a valid bearer token is required"}}`))
			return
		}
		id, err := h.Auth.Authenticate(r.Context(), tok)
		if err != nil {
			h.Metrics.AuthFailure("ops", "unauthorized")
			w.Header().Set("WWW-Authenticate", `Bearer realm="eventhub", error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"bad_token","msg":"a valid bearer token is required"}}`))
			return
		}
		if !id.HasScope(scope) && !id.HasScope(auth.ScopeAdmin) {
			h.Metrics.AuthFailure("ops", "forbidden")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `{"error":{"code":"forbidden","msg":"this needs a token with the %s or %s scope"}}`, scope, auth.ScopeAdmin)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func bearer(r *http.Request) (string, bool) {
	const p = "Bearer "
	a := r.Header.Get("Authorization")
	if len(a) <= len(p) || !strings.EqualFold(a[:len(p)], p) {
		return "", false
	}
	return a[len(p):], true
}
