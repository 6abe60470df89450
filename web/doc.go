// Package web serves eventhub's browser side: the browser client of the
// WebSocket gateway (client.js, an ES module, with its TypeScript typings
// client.d.ts) and a live dashboard (index.html, dashboard.js, style.css)
// that shows the current process.state of every process (a snapshot of the
// compacted topic, then its live events over WebSocket; no consumer group),
// the topics and their groups' lag from the ops endpoints, and a form to
// publish a test event.
//
// The files are embedded ([embed]); there is no build step and nothing is
// fetched from elsewhere: the page runs under a Content-Security-Policy that
// allows only its own origin (and WebSocket connections).
//
// # Use
//
// Mount the site, the gateway and the ops endpoints on one server, so that
// the page, its WebSocket and its fetches share one origin (the gateway
// accepts browsers from its own origin only, unless AllowedOrigins says
// otherwise):
//
//	site, err := web.New(web.Config{OpsBase: "/ops", WebSocket: gw.Handler()})
//	mux := http.NewServeMux()
//	mux.Handle("GET /ws", gw.Handler())
//	mux.Handle("POST /publish/{topic}", gw.Handler())
//	mux.Handle("DELETE /publish/{topic}", gw.Handler()) // deleting keys
//	mux.Handle("/ops/", http.StripPrefix("/ops", opsHandler))
//	mux.Handle("/", site) // the dashboard; WebSocket upgrades of "/" go to Config.WebSocket
//
// [Handler] is the same site with the zero [Config].
//
// # Concurrency
//
// A [Site] is immutable once built and safe for concurrent use. It starts no
// goroutine and needs no Close.
package web
