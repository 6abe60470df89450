package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventhub/eventhub/gateway"
)

// GatewayCollector reports the WebSocket gateway on every scrape: open
// connections, and events on the wire per topic and group (ws_inflight). It
// reads a snapshot of the sessions, so the delivery path counts nothing.
type GatewayCollector struct {
	m    *Metrics
	g    *gateway.Gateway
	conn *prometheus.Desc
	infl *prometheus.Desc
}

// NewGatewayCollector returns the collector of g; topic and group labels are
// bounded like the other metrics'.
func (m *Metrics) NewGatewayCollector(g *gateway.Gateway) *GatewayCollector {
	return &GatewayCollector{
		m:    m,
		g:    g,
		conn: prometheus.NewDesc("ws_connections", "Open WebSocket connections.", nil, nil),
		infl: prometheus.NewDesc("ws_inflight", "Events on the wire to WebSocket clients, not yet acknowledged.", []string{"topic", "group"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *GatewayCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.conn; ch <- c.infl }

// Collect implements prometheus.Collector.
func (c *GatewayCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.g.Stats()
	ch <- prometheus.MustNewConstMetric(c.conn, prometheus.GaugeValue, float64(st.Connections))
	sums := map[[2]string]int{}
	for _, s := range st.Subscriptions {
		t, g := c.m.groupLabels(s.Topic, s.Group)
		sums[[2]string{t, g}] += s.InFlight
	}
	for k, n := range sums {
		ch <- prometheus.MustNewConstMetric(c.infl, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
}
