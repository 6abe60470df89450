package metrics

import (
	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
)

// ServerCollector reports the embedded nats-server's health on every scrape:
// whether JetStream is enabled, connections, memory and storage used, and
// stream / consumer counts.
type ServerCollector struct {
	srv *server.Server

	up, conns, mem, store, streams, consumers, slow *prometheus.Desc
}

// NewServerCollector returns a collector for srv; register it with the same
// registry as the other metrics.
func NewServerCollector(srv *server.Server) *ServerCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &ServerCollector{
		srv:       srv,
		up:        d("nats_jetstream_up", "1 when the embedded server runs with JetStream enabled."),
		conns:     d("nats_connections", "Client connections to the embedded server."),
		mem:       d("nats_jetstream_memory_bytes", "JetStream memory storage in use."),
		store:     d("nats_jetstream_storage_bytes", "JetStream file storage in use."),
		streams:   d("nats_jetstream_streams", "Streams on the embedded server."),
		consumers: d("nats_jetstream_consumers", "Consumers on the embedded server."),
		slow:      d("nats_slow_consumers_total", "Clients the embedded server dropped for being slow."),
	}
}

// Describe implements prometheus.Collector.
func (c *ServerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.conns, c.mem, c.store, c.streams, c.consumers, c.slow} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *ServerCollector) Collect(ch chan<- prometheus.Metric) {
	up := 0.0
	if c.srv.Running() && c.srv.JetStreamEnabled() {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
	v, err := c.srv.Varz(nil)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(v.Connections))
	ch <- prometheus.MustNewConstMetric(c.slow, prometheus.CounterValue, float64(v.SlowConsumers))
	if jsz, err := c.srv.Jsz(&server.JSzOptions{}); err == nil {
		ch <- prometheus.MustNewConstMetric(c.mem, prometheus.GaugeValue, float64(jsz.Memory))
		ch <- prometheus.MustNewConstMetric(c.store, prometheus.GaugeValue, float64(jsz.Store))
		ch <- prometheus.MustNewConstMetric(c.streams, prometheus.GaugeValue, float64(jsz.Streams))
		ch <- prometheus.MustNewConstMetric(c.consumers, prometheus.GaugeValue, float64(jsz.Consumers))
	}
}
