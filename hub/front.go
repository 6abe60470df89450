package hub

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/eventhub/eventhub/compaction"
	"github.com/eventhub/eventhub/gateway"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/projector"
	"github.com/eventhub/eventhub/web"
)

// DemoHeartbeatRetention is how long the demo (-demo) keeps its sample
// heartbeats, unless the topics' settings say otherwise.
const DemoHeartbeatRetention = 3 * 24 * time.Hour

// withDerivedTopics adds the topic settings the configured components need,
// as topics entries of the configuration file would: compacted snapshot
// topics for the compactors, a compacted process.state for the projector,
// and for the demo heartbeats kept DemoHeartbeatRetention. Explicit
// settings for those topics win (the first matching entry does).
func (c Config) withDerivedTopics() Config {
	add := func(tc jetstream.TopicConfig) {
		if slices.ContainsFunc(c.Bus.Topics, func(t jetstream.TopicConfig) bool { return t.Pattern == tc.Pattern }) {
			return
		}
		c.Bus.Topics = append(slices.Clone(c.Bus.Topics), tc)
	}
	need := func(pattern string) { add(jetstream.TopicConfig{Pattern: pattern, Compaction: true}) }
	for _, cc := range c.Compactors {
		snap := cc.Snapshot
		if snap == "" {
			snap = cc.Source + ".snapshot"
		}
		need(snap)
	}
	if c.Projector.Enabled || c.Projector.Demo {
		need(cmp.Or(c.Projector.Projector.States, projector.DefaultStates))
	}
	if c.Projector.Demo {
		add(jetstream.TopicConfig{Pattern: cmp.Or(c.Projector.Projector.Heartbeats, projector.DefaultHeartbeats), MaxAge: DemoHeartbeatRetention})
	}
	return c
}

// startFront starts the WebSocket gateway and the HTTP port.
func (h *Hub) startFront() error {
	c := h.cfg
	if c.Server.WSPort == -1 && c.Server.HTTPPort == -1 {
		return nil
	}
	gc := c.Gateway
	gc.Logger = h.log.With("component", "gateway")
	gc.OnAuthFailure = h.Metrics.AuthFailure
	if h.limiter != nil {
		gc.Limiter = gatewayLimiter{h.limiter}
	}
	if h.Auth.Configured() {
		gc.Token = ""
		gc.Authenticator = gateway.AuthenticatorFunc(func(ctx context.Context, token string) (gateway.Principal, error) {
			id, err := h.Auth.Authenticate(ctx, token)
			if err != nil {
				return nil, err
			}
			return id, nil
		})
	}
	gw, err := gateway.New(h.Bus, gc)
	if err != nil {
		return err
	}
	h.gateway = gw
	h.Registry.MustRegister(h.Metrics.NewGatewayCollector(gw))
	if c.Server.WSPort != -1 {
		if err := h.servers.serve("ws", c.Server.Host, c.Server.WSPort, h.hostGuard(gw.Handler()), h.fail); err != nil {
			return err
		}
	}
	if c.Server.HTTPPort != -1 {
		oh, err := h.opsHandler()
		if err != nil {
			return err
		}
		// One origin for the dashboard, its WebSocket and its ops fetches, so
		// the gateway's Origin check passes without configuration.
		site, err := web.New(web.Config{OpsBase: "/ops", WebSocket: gw.Handler()})
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/ops/", http.StripPrefix("/ops", oh))
		mux.Handle("GET /ws", gw.Handler())
		mux.Handle("/publish/", gw.Handler()) // the gateway answers wrong methods and paths
		mux.Handle("/sse/", gw.Handler())
		mux.Handle("/", site) // WebSocket upgrades of "/" still reach the gateway
		if err := h.servers.serve("http", c.Server.Host, c.Server.HTTPPort, h.hostGuard(mux), h.fail); err != nil {
			return err
		}
	}
	h.log.Info("gateway listening", "ws", h.servers.addr("ws"), "http", h.servers.addr("http"),
		"auth", h.Auth.Configured(), "allowed_origins", gc.AllowedOrigins)
	return nil
}

// startWorkers starts the compactors and, when asked, the projector and the
// demo heartbeats.
func (h *Hub) startWorkers(ctx, bg context.Context) error {
	for _, cc := range h.cfg.Compactors {
		cc.Logger = h.log // the compactor names itself (component, source)
		comp, err := compaction.Start(ctx, h.Bus, cc)
		if err != nil {
			return fmt.Errorf("compactor %s: %w", cc.Source, err)
		}
		h.compactors = append(h.compactors, comp)
	}
	if h.cfg.Projector.Enabled || h.cfg.Projector.Demo {
		pc := h.cfg.Projector.Projector
		pc.Logger = h.log
		p, err := projector.Start(ctx, h.Bus, pc)
		if err != nil {
			return err // the projector's errors name it
		}
		h.projector = p
	}
	if h.cfg.Projector.Demo {
		heartbeats := cmp.Or(h.cfg.Projector.Projector.Heartbeats, projector.DefaultHeartbeats)
		states := cmp.Or(h.cfg.Projector.Projector.States, projector.DefaultStates)
		dctx, cancel := context.WithCancel(bg)
		h.stopDemo = cancel
		h.bg.Go(func() {
			_ = projector.Demo(dctx, h.Bus, projector.DemoConfig{Topic: heartbeats, Logger: h.log.With("component", "demo")})
		})
		h.log.Info("demo: publishing sample heartbeats", "topic", heartbeats, "watch", states)
	}
	return nil
}
