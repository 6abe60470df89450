package hub

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// hostGuard refuses, when authentication is off, requests whose Host is
// not a name of this hub: the listen address, a loopback address,
// localhost, or one of Config.AllowedHosts. Without it a web page could
// rebind its own domain name to 127.0.0.1 and, being same-origin with
// itself, publish, replay and open WebSockets on an unauthenticated hub
// (DNS rebinding). With auth on, requests need a token such a page cannot
// read, so every Host is accepted.
func (h *Hub) hostGuard(next http.Handler) http.Handler {
	if h.Auth.Configured() {
		return next
	}
	allowed := map[string]bool{"localhost": true}
	for _, n := range append([]string{h.cfg.Server.Host}, h.cfg.Server.AllowedHosts...) {
		if n = strings.ToLower(strings.Trim(strings.TrimSpace(n), "[]")); n != "" {
			allowed[n] = true
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if hn, _, err := net.SplitHostPort(host); err == nil {
			host = hn
		}
		host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
		if allowed[host] || strings.HasSuffix(host, ".localhost") {
			next.ServeHTTP(w, r)
			return
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			next.ServeHTTP(w, r)
			return
		}
		h.Metrics.AuthFailure("http", "bad_host")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusMisdirectedRequest)
		fmt.Fprintf(w, `{"error":{"code":"forbidden","msg":%q}}`,
			fmt.Sprintf("Host %q is not a name of this hub; without authentication only loopback names and EVENTHUB_ALLOWED_HOSTS are served", r.Host))
	})
}
