package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
)

//go:embed static
var staticFS embed.FS

// ErrInvalidConfig is wrapped by the errors of [Config.Validate].
var ErrInvalidConfig = errors.New("web: invalid config")

// Config configures a [Site]. The zero value is valid: the dashboard talks
// to the gateway at ws(s)://<its host>/ws and to the ops endpoints at the
// root of its own origin (/topics, /lag).
type Config struct {
	// OpsBase is where the dashboard finds the ops endpoints: "" (the root of
	// the page's origin), a path prefix such as "/ops" (ops mounted with
	// http.StripPrefix("/ops", ...)), or an absolute http(s) URL of another
	// origin, which is then added to the page's connect-src (that origin
	// must answer CORS requests with an Authorization header). The page's
	// ?ops=/prefix query parameter overrides it with a same-origin path.
	OpsBase string
	// WSURL is where the dashboard's client connects: "" (ws(s)://<its
	// host>/ws), a path on the page's origin ("/ws"), or an absolute ws(s)
	// URL. The page's ?ws=/path query parameter overrides it with a
	// same-origin path.
	WSURL string
	// WebSocket, when set, receives the WebSocket upgrade requests of "/"
	// (GET with "Upgrade: websocket"), so that the site can take "/" of a
	// server whose clients dial the gateway at "/" (docs/protocol.md):
	// set it to the gateway's Handler. Nil: such requests get the page.
	WebSocket http.Handler
}

// Validate reports the first invalid setting; its errors wrap
// [ErrInvalidConfig].
func (c Config) Validate() error {
	if c.OpsBase != "" {
		if _, err := opsOrigin(c.OpsBase); err != nil {
			return err
		}
	}
	if c.WSURL != "" {
		if strings.HasPrefix(c.WSURL, "/") && !strings.HasPrefix(c.WSURL, "//") {
			return nil
		}
		u, err := url.Parse(c.WSURL)
		if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" || u.Fragment != "" {
			return fmt.Errorf("%w: WSURL %q: want a path (/ws) or a ws:// or wss:// URL", ErrInvalidConfig, c.WSURL)
		}
	}
	return nil
}

// opsOrigin returns the origin to add to connect-src for base ("" for a
// same-origin path).
func opsOrigin(base string) (string, error) {
	if strings.HasPrefix(base, "/") && !strings.HasPrefix(base, "//") {
		if strings.ContainsAny(base, "?#") {
			return "", fmt.Errorf("%w: OpsBase %q: a path prefix has no query or fragment", ErrInvalidConfig, base)
		}
		return "", nil
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%w: OpsBase %q: want a path prefix (/ops) or an http(s) URL without query", ErrInvalidConfig, base)
	}
	return u.Scheme + "://" + u.Host, nil
}

// Site serves the embedded files: "/" (the dashboard), "/console" (the
// operator console on the admin API), "/console.js", "/client.js",
// "/client.d.ts", "/dashboard.js", "/sameorigin.js", "/style.css" and
// "/favicon.svg", for GET
// and HEAD. Every answer carries the Content-Security-Policy of
// [Site.ContentSecurityPolicy], "X-Content-Type-Options: nosniff" and
// "Referrer-Policy: no-referrer"; files carry a strong ETag and
// "Cache-Control: no-cache" (the browser revalidates and gets 304 while the
// hub runs the same build). Other paths get 404, other methods 405.
//
// A Site is safe for concurrent use.
type Site struct {
	files map[string]*file
	ws    http.Handler
	csp   string
}

type file struct {
	name  string
	body  []byte
	ctype string
	etag  string
	cors  bool // may be loaded from other origins (the client module)
}

// contentTypes maps the extensions of the embedded files to their type.
// JavaScript modules must be served as JavaScript (text/javascript, RFC
// 9239) or browsers refuse to run them.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".ts":   "application/typescript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// packageOnly are the files of web/static that make it the client's npm
// package (npm pack web/static) and are not part of the site.
var packageOnly = map[string]bool{"package.json": true, "README.md": true}

// New builds the site for cfg, or returns the error of [Config.Validate].
func New(cfg Config) (*Site, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Site{files: make(map[string]*file), ws: cfg.WebSocket}
	connect := "'self' ws: wss:"
	if cfg.OpsBase != "" {
		if o, _ := opsOrigin(cfg.OpsBase); o != "" {
			connect += " " + o
		}
	}
	s.csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src " + connect +
		"; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || packageOnly[path.Base(p)] {
			return err
		}
		body, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "static/")
		route := "/" + name
		switch name {
		case "index.html":
			route = "/"
			body = renderIndex(body, cfg)
		case "console.html":
			route = "/console"
			body = renderIndex(body, cfg)
		}
		ctype, ok := contentTypes[path.Ext(name)]
		if !ok {
			return fmt.Errorf("web: no content type for %s", name)
		}
		sum := sha256.Sum256(body)
		s.files[route] = &file{
			name:  name,
			body:  body,
			ctype: ctype,
			etag:  `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`,
			cors:  strings.HasPrefix(name, "client."),
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("web: embedded files: %w", err)
	}
	return s, nil
}

// renderIndex fills the dashboard's <meta> configuration, HTML-escaped.
func renderIndex(body []byte, cfg Config) []byte {
	r := strings.NewReplacer(
		"{{.OpsBase}}", html.EscapeString(strings.TrimRight(cfg.OpsBase, "/")),
		"{{.WSURL}}", html.EscapeString(cfg.WSURL),
	)
	return []byte(r.Replace(string(body)))
}

// Handler returns the site with the zero [Config]: ops endpoints at the
// root of the page's origin, the gateway at /ws.
func Handler() http.Handler {
	s, err := New(Config{})
	if err != nil {
		panic(err) // the zero Config is valid and the files are embedded
	}
	return s
}

// ContentSecurityPolicy returns the policy every answer carries.
func (s *Site) ContentSecurityPolicy() string { return s.csp }

// ServeHTTP serves one request; see [Site].
func (s *Site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.ws != nil && r.URL.Path == "/" && isUpgrade(r) {
		s.ws.ServeHTTP(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", s.csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	f, ok := s.files[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
		return
	}
	h.Set("Content-Type", f.ctype)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", f.etag)
	if f.cors {
		h.Set("Access-Control-Allow-Origin", "*")
	}
	http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.body))
}

func isUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && headerHasToken(r.Header, "Connection", "upgrade") &&
		headerHasToken(r.Header, "Upgrade", "websocket")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
