package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventhub/eventhub/outbox"
)

// OutboxCollector reports an outbox drainer and its store on every scrape:
// pending records, the age of the oldest unsent one, and the drainer's sent,
// retried, deferred and errored totals.
type OutboxCollector struct {
	d *outbox.Drainer
	s *outbox.Store

	pending, claimed, failed, oldest       *prometheus.Desc
	sent, retried, deferred, errored, lost *prometheus.Desc
}

// NewOutboxCollector returns a collector for a drainer and its store.
func NewOutboxCollector(d *outbox.Drainer, s *outbox.Store) *OutboxCollector {
	l := prometheus.Labels{"table": s.Table()}
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, l) }
	return &OutboxCollector{
		d: d, s: s,
		pending:  desc("outbox_pending", "Outbox records waiting to be published (backoffs included)."),
		claimed:  desc("outbox_claimed", "Outbox records claimed by a drainer."),
		failed:   desc("outbox_error", "Outbox records parked as error."),
		oldest:   desc("outbox_oldest_pending_age_seconds", "Age of the oldest unsent outbox record."),
		sent:     desc("outbox_sent_total", "Records this drainer published and marked sent."),
		retried:  desc("outbox_retried_total", "Failed publishes handed back for a retry."),
		deferred: desc("outbox_deferred_total", "Records handed back while the event store was unavailable (not counted as attempts)."),
		errored:  desc("outbox_errored_total", "Records this drainer parked as error."),
		lost:     desc("outbox_lease_lost_total", "Records whose lease another drainer took over."),
	}
}

// Describe implements prometheus.Collector.
func (c *OutboxCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.claimed, c.failed, c.oldest, c.sent, c.retried, c.deferred, c.errored, c.lost} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. The store's figures come from one
// query, bounded by a short timeout.
func (c *OutboxCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.d.Stats()
	for _, x := range []struct {
		d *prometheus.Desc
		v uint64
	}{{c.sent, st.Sent}, {c.retried, st.Retried}, {c.deferred, st.Deferred}, {c.errored, st.Errored}, {c.lost, st.LeaseLost}} {
		ch <- prometheus.MustNewConstMetric(x.d, prometheus.CounterValue, float64(x.v))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ss, err := c.s.Stats(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(ss.Pending))
	ch <- prometheus.MustNewConstMetric(c.claimed, prometheus.GaugeValue, float64(ss.Claimed))
	ch <- prometheus.MustNewConstMetric(c.failed, prometheus.GaugeValue, float64(ss.Failed))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, ss.OldestUnsentAge.Seconds())
}
