// Package metrics exposes eventhub's Prometheus metrics, with stable names and
// labels (docs/http-api.md lists them), on a registry the caller owns (no global
// registry). *Metrics implements jetstream.Observer; the gateway and the
// outbox report through the methods named for them.
//
// # Cardinality
//
// Labels are topics and groups, which users create. To keep the number of
// series bounded with thousands of topics, at most Config.MaxTopics distinct
// topics and Config.MaxGroups distinct topic/group pairs get their own label
// values; later ones are counted under the label value "_other". The first
// ones seen keep their series for the life of the process.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventhub/eventhub/jetstream"
)

// OtherLabel is the label value of topics and groups beyond the limits.
const OtherLabel = "_other"

// Defaults of [Config].
const (
	DefaultMaxTopics = 1000
	DefaultMaxGroups = 2000
)

// Config bounds the metrics' label cardinality.
type Config struct {
	// MaxTopics is how many topics get a label of their own (default
	// 1000); the others are counted under "_other".
	MaxTopics int `yaml:"maxTopics"`
	// MaxGroups is how many topic/group pairs get labels of their own
	// (default 2000); the others are counted under "_other".
	MaxGroups int `yaml:"maxGroups"`
}

// WithDefaults returns c with every unset setting at its default.
func (c Config) WithDefaults() Config {
	if c.MaxTopics <= 0 {
		c.MaxTopics = DefaultMaxTopics
	}
	if c.MaxGroups <= 0 {
		c.MaxGroups = DefaultMaxGroups
	}
	return c
}

// Metrics holds the collectors. It is safe for concurrent use.
type Metrics struct {
	cfg Config

	published    *prometheus.CounterVec
	delivered    *prometheus.CounterVec
	inflight     *prometheus.GaugeVec
	acked        *prometheus.CounterVec
	nacked       *prometheus.CounterVec
	deadLettered *prometheus.CounterVec
	handlerMs    *prometheus.HistogramVec
	pollMs       *prometheus.HistogramVec
	latencyMs    *prometheus.HistogramVec

	authFailures *prometheus.CounterVec
	throttled    *prometheus.CounterVec

	mu     sync.Mutex
	topics map[string]bool
	groups map[[2]string]bool
}

var _ jetstream.Observer = (*Metrics)(nil)

var msBuckets = []float64{0.1, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000}

// New creates the collectors and registers them with reg.
func New(reg prometheus.Registerer, cfg Config) (*Metrics, error) {
	cfg = cfg.WithDefaults()
	tg := []string{"topic", "group"}
	m := &Metrics{
		cfg:       cfg,
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "events_published_total", Help: "Events accepted by the store, by topic."}, []string{"topic"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "events_delivered_total", Help: "Deliveries of events to subscriptions (redeliveries included)."}, tg),
		inflight:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "events_inflight", Help: "Delivered events not yet acknowledged or nacked."}, tg),
		acked:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "events_acked_total", Help: "Acknowledged events."}, tg),
		nacked:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "events_nacked_total", Help: "Nacked deliveries (handler errors and NACKs)."}, tg),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "events_dead_lettered_total",
			Help: "Events copied to the dead-letter topic after their last attempt."}, tg),
		handlerMs: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "delivery_handler_duration_ms",
			Help: "Handler run time in milliseconds.", Buckets: msBuckets}, tg),
		pollMs: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "subscribe_poll_duration_ms",
			Help: "Time a pulled event waited for a free in-flight slot before dispatch, in milliseconds.", Buckets: msBuckets}, tg),
		latencyMs: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "delivery_latency_ms",
			Help: "Publish (event ts) to acknowledgement, in milliseconds.", Buckets: msBuckets}, tg),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "auth_failures_total",
			Help: "Refused authentications and authorisations, by transport and reason code."}, []string{"transport", "code"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "requests_throttled_total",
			Help: "Requests refused by a rate limit or quota, by principal class (configured, never per token) and reason."}, []string{"class", "reason"}),
		topics: map[string]bool{},
		groups: map[[2]string]bool{},
	}
	for _, c := range []prometheus.Collector{m.published, m.delivered, m.inflight, m.acked, m.nacked, m.deadLettered,
		m.handlerMs, m.pollMs, m.latencyMs, m.authFailures, m.throttled} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// topicLabel returns topic, or OtherLabel once MaxTopics are labelled.
func (m *Metrics) topicLabel(topic string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.topics[topic] {
		return topic
	}
	if len(m.topics) >= m.cfg.MaxTopics {
		return OtherLabel
	}
	m.topics[topic] = true
	return topic
}

// groupLabels returns the labels of a topic/group pair within the limits.
func (m *Metrics) groupLabels(topic, group string) (string, string) {
	t := m.topicLabel(topic)
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{t, group}
	if m.groups[k] {
		return t, group
	}
	if len(m.groups) >= m.cfg.MaxGroups {
		return OtherLabel, OtherLabel
	}
	m.groups[k] = true
	return t, group
}

// Topic implements jetstream.Observer.
func (m *Metrics) Topic(topic string) jetstream.TopicObserver {
	return topicObs{m.published.WithLabelValues(m.topicLabel(topic))}
}

type topicObs struct{ c prometheus.Counter }

func (o topicObs) Published() { o.c.Inc() }

// Group implements jetstream.Observer.
func (m *Metrics) Group(topic, group string) jetstream.GroupObserver {
	t, g := m.groupLabels(topic, group)
	return &groupObs{
		delivered:    m.delivered.WithLabelValues(t, g),
		inflight:     m.inflight.WithLabelValues(t, g),
		acked:        m.acked.WithLabelValues(t, g),
		nacked:       m.nacked.WithLabelValues(t, g),
		deadLettered: m.deadLettered.WithLabelValues(t, g),
		handler:      m.handlerMs.WithLabelValues(t, g),
		poll:         m.pollMs.WithLabelValues(t, g),
		latency:      m.latencyMs.WithLabelValues(t, g),
	}
}

type groupObs struct {
	delivered, acked, nacked, deadLettered prometheus.Counter
	inflight                               prometheus.Gauge
	handler, poll, latency                 prometheus.Observer
}

func (o *groupObs) Delivered()              { o.delivered.Inc() }
func (o *groupObs) InFlight(d int)          { o.inflight.Add(float64(d)) }
func (o *groupObs) Waited(d time.Duration)  { o.poll.Observe(ms(d)) }
func (o *groupObs) Handled(d time.Duration) { o.handler.Observe(ms(d)) }
func (o *groupObs) Acked(lat time.Duration) { o.acked.Inc(); o.latency.Observe(ms(max(lat, 0))) }
func (o *groupObs) Nacked()                 { o.nacked.Inc() }
func (o *groupObs) DeadLettered()           { o.deadLettered.Inc() }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// AuthFailure counts a refused authentication or authorisation.
func (m *Metrics) AuthFailure(transport, code string) {
	m.authFailures.WithLabelValues(transport, code).Inc()
}

// Throttled counts a request refused by a rate limit or quota. class is a
// principal class from the limits configuration, so the label's values are
// bounded by the configuration, not by the tokens in use.
func (m *Metrics) Throttled(class, reason string) {
	m.throttled.WithLabelValues(class, reason).Inc()
}
