package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/metrics"
)

// value returns the value of the series name{labels} gathered from reg.
func value(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue next
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return -1
}

func TestKnownSequence(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.RunEmbedded(t)
	if err := reg.Register(metrics.NewServerCollector(srv)); err != nil {
		t.Fatal(err)
	}
	b, err := jetstream.New(natstest.InProcessConn(t, srv), jetstream.Config{Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	var seen atomic.Int64
	unsub, err := b.Subscribe(ctx, "m.t", "g", func(_ context.Context, d facade.Delivery) error {
		e := d.Event()
		seen.Add(1)
		var v struct{ N int }
		_ = json.Unmarshal(e.Payload, &v)
		if v.N >= 7 && d.Attempt() == 1 {
			return errors.New("first attempt of the last three fails")
		}
		return nil
	}, facade.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub.Stop(ctx)
	for i := range 10 {
		if _, err := b.Publish(ctx, "m.t", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), facade.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tg := map[string]string{"topic": "m.t", "group": "g"}
	testutil.CheckFor(t, 15*time.Second, func() error {
		if n := value(t, reg, "events_acked_total", tg); n != 10 {
			return fmt.Errorf("acked %v, want 10", n)
		}
		return nil
	})
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"events_published_total", map[string]string{"topic": "m.t"}, 10},
		{"events_delivered_total", tg, 13}, // 10 + 3 redeliveries
		{"events_nacked_total", tg, 3},
		{"events_acked_total", tg, 10},
		{"events_inflight", tg, 0},
		{"events_dead_lettered_total", tg, 0},
		{"delivery_handler_duration_ms", tg, 13},
		{"delivery_latency_ms", tg, 10},
		{"subscribe_poll_duration_ms", tg, 13},
		{"nats_jetstream_up", nil, 1},
		{"nats_jetstream_streams", nil, 1},
		{"nats_jetstream_consumers", nil, 1},
	}
	for _, c := range checks {
		if got := value(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

func TestCardinalityBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Config{MaxTopics: 2, MaxGroups: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		m.Topic(fmt.Sprintf("t%d", i)).Published()
		m.Group(fmt.Sprintf("t%d", i%2), fmt.Sprintf("g%d", i)).Acked(time.Millisecond)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		switch mf.GetName() {
		case "events_published_total":
			if n := len(mf.GetMetric()); n != 3 { // t0, t1, _other
				t.Fatalf("published series %d, want 3", n)
			}
		case "events_acked_total":
			if n := len(mf.GetMetric()); n != 4 { // 3 pairs + _other
				t.Fatalf("acked series %d, want 4", n)
			}
		}
	}
	if v := value(t, reg, "events_published_total", map[string]string{"topic": metrics.OtherLabel}); v != 8 {
		t.Fatalf("_other published %v, want 8", v)
	}
}
