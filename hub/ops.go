package hub

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// opsHandler serves the ops port: /metrics, and health.
func (h *Hub) opsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h.requireAuth(promhttp.HandlerFor(h.Registry, promhttp.HandlerOpts{})))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	return mux
}

// requireAuth admits requests with a valid bearer token when auth is on.
func (h *Hub) requireAuth(next http.Handler) http.Handler {
	if !h.Auth.Configured() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearer(r)
		if ok {
			if _, err := h.Auth.Authenticate(r.Context(), tok); err == nil {
				next.ServeHTTP(w, r)
				return
			}
		}
		h.Metrics.AuthFailure("ops", "unauthorized")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("WWW-Authenticate", `Bearer realm="eventhub"`)
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","msg":"a valid bearer token is required"}}`))
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
