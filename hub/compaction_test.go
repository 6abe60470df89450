package hub_test

import (
	"context"
	"testing"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
)

// TestDemoAfterADashboardReadProcessState: a reader of process.state (the
// dashboard, before the projector ever ran) created a plain stream; a
// later start with -demo, which declares process.state compacted, makes
// that stream compacted instead of failing with not_compacted for good.
func TestDemoAfterADashboardReadProcessState(t *testing.T) {
	dir := t.TempDir()
	cfg := hub.Config{NATS: hub.NATSConfig{DataDir: dir, Port: -1}, Server: hub.ServerConfig{OpsPort: -1, WSPort: -1, HTTPPort: -1}}
	first, err := hub.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	nop := func(context.Context, facade.Delivery) error { return nil }
	unsub, err := first.Bus.Subscribe(t.Context(), "process.state", "dashboard-1", nop, facade.SubscribeOptions{From: facade.FromEarliest})
	if err != nil {
		t.Fatal(err)
	}
	_ = unsub.Stop(t.Context())
	if _, err := first.Bus.Publish(t.Context(), "process.state", []byte(`{"old":true}`), facade.PublishOptions{Key: "h:n:1"}); err != nil {
		t.Fatal(err)
	}
	if err := first.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}

	cfg.Projector.Demo = true
	second, err := hub.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("-demo after a plain process.state: %v", err)
	}
	defer second.Shutdown(context.Background())
	ti, err := second.Bus.LookupTopic(t.Context(), "process.state")
	if err != nil {
		t.Fatal(err)
	}
	info, err := ti.Stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.MaxMsgsPerSubject != 1 {
		t.Fatalf("process.state keeps %d per subject, want 1", info.Config.MaxMsgsPerSubject)
	}
}
