package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventhub/eventhub/gateway"
)

// GatewayCollector reports the WebSocket gateway on every scrape: open
// connections, events on the wire per topic and group (ws_inflight), the
// bus members it runs, and its live subscriptions (subscribers per topic,
// fan-out and drops). It
// reads a snapshot of the sessions, so the delivery path counts nothing.
type GatewayCollector struct {
	m       *Metrics
	g       *gateway.Gateway
	conn    *prometheus.Desc
	infl    *prometheus.Desc
	members *prometheus.Desc
	live    *prometheus.Desc
	fanout  *prometheus.Desc
	drops   *prometheus.Desc
}

// NewGatewayCollector returns the collector of g; topic and group labels are
// bounded like the other metrics'.
func (m *Metrics) NewGatewayCollector(g *gateway.Gateway) *GatewayCollector {
	return &GatewayCollector{
		m:       m,
		g:       g,
		conn:    prometheus.NewDesc("ws_connections", "Open WebSocket connections.", nil, nil),
		infl:    prometheus.NewDesc("ws_inflight", "Events on the wire to WebSocket clients, not yet acknowledged.", []string{"topic", "group"}, nil),
		members: prometheus.NewDesc("ws_group_members", "Bus members (one pull each) the gateway runs for the groups its connections subscribe to.", nil, nil),
		live:    prometheus.NewDesc("live_subscribers", "Live subscriptions (WebSocket and SSE) per topic.", []string{"topic"}, nil),
		fanout:  prometheus.NewDesc("live_fanout_total", "Live events queued to subscribers.", nil, nil),
		drops:   prometheus.NewDesc("live_drops_total", "Live subscriptions ended because their client was too slow.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *GatewayCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.conn
	ch <- c.infl
	ch <- c.members
	ch <- c.live
	ch <- c.fanout
	ch <- c.drops
}

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
	ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(st.GroupMembers))
	live := map[string]int{}
	for topic, n := range st.LiveSubscribers {
		live[c.m.topicLabel(topic)] += n
	}
	for t, n := range live {
		ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, float64(n), t)
	}
	ch <- prometheus.MustNewConstMetric(c.fanout, prometheus.CounterValue, float64(st.LiveFanout))
	ch <- prometheus.MustNewConstMetric(c.drops, prometheus.CounterValue, float64(st.LiveDrops))
}
