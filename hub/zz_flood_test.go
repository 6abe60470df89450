package hub_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/jetstream"
)

func heapMB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse) / (1 << 20)
}

func TestZZFlood(t *testing.T) {
	h := startHub(t, hub.Config{Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}})
	ctx := t.Context()
	sub, err := h.Bus.Subscribe(ctx, "zz.top", "g", func(context.Context, facade.Delivery) error { return nil }, facade.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = sub.Stop(ctx)
	stream := streamOf(t, h, "zz.top")
	cons := jetstream.ConsumerName("g", "zz.top", false)
	c := connectNative(t, h, mintAs(t, "flood", "subscribe:zz.top"))
	in, _ := c.nc.Subscribe("_INBOX.flood.>", func(*nats.Msg) {})
	_ = in
	base := heapMB()
	subj := "$JS.API.CONSUMER.MSG.NEXT." + stream + "." + cons
	req := []byte(`{"batch":1,"expires":60000000000}`)
	t0 := time.Now()
	n := 0
	for time.Since(t0) < 3*time.Second {
		_ = c.nc.PublishRequest(subj, "_INBOX.flood."+nats.NewInbox()[7:], req)
		n++
	}
	_ = c.nc.Flush()
	hubAcc := h.Bus.Server().GlobalAccount()
	t.Logf("%d requests, heap +%.1f MB, pending responses %d", n, heapMB()-base, hubAcc.NumPendingAllResponses())
	c.nc.Close()
	time.Sleep(time.Second)
	t.Logf("after close: heap +%.1f MB, pending responses %d", heapMB()-base, hubAcc.NumPendingAllResponses())
}
