// Package deps pins the modules the project builds on until code imports them.
package deps

import (
	_ "github.com/MicahParks/keyfunc/v3"
	_ "github.com/chromedp/chromedp"
	_ "github.com/golang-jwt/jwt/v5"
	_ "github.com/google/uuid"
	_ "github.com/gorilla/websocket"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "gopkg.in/yaml.v3"
	_ "modernc.org/sqlite"
)
