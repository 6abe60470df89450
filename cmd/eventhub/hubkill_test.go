package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/eventhub/eventhub/client"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/internal/testutil"
)

// TestHubKilledWhileClientsHoldDeliveries kills (-9) a hub process whose
// WebSocket client holds unacknowledged deliveries: the other hub's member
// of the group gets every one of them within the ack timeout (plus the
// gateway's one-second margin), none is lost, and the group's cursor never
// passes an unacknowledged event.
func TestHubKilledWhileClientsHoldDeliveries(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	conf := filepath.Join(t.TempDir(), "hub.yaml")
	if err := os.WriteFile(conf, []byte("replicas: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(ws, ops int) map[string]string {
		return map[string]string{
			"NATS_URL": c.URL(), "EVENTHUB_CONFIG": conf,
			"WS_PORT": strconv.Itoa(ws), "OPS_PORT": strconv.Itoa(ops), "HTTP_PORT": "-1",
		}
	}
	// Hub a: a separate process, to be killed.
	wsA, opsA := freeLoopbackPort(t), freeLoopbackPort(t)
	a := exec.Command(binary(t), "serve")
	for k, v := range env(wsA, opsA) {
		a.Env = append(a.Env, k+"="+v)
	}
	var aLog syncBuffer
	a.Stdout, a.Stderr = &aLog, &aLog
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Process.Kill(); _ = a.Wait() })
	// Hub b: in this process.
	wsB, opsB := freeLoopbackPort(t), freeLoopbackPort(t)
	envB := env(wsB, opsB)
	ctx, stopB := context.WithCancel(context.Background())
	bDone := make(chan error, 1)
	go func() {
		bDone <- run(ctx, []string{"serve"}, func(k string) string { return envB[k] }, io.Discard, io.Discard)
	}()
	t.Cleanup(func() { stopB(); <-bDone })
	for _, ops := range []int{opsA, opsB} {
		testutil.CheckFor(t, 60*time.Second, func() error {
			return run(t.Context(), []string{"healthcheck", "-ops-port", strconv.Itoa(ops)}, func(string) string { return "" }, io.Discard, io.Discard)
		})
	}

	const topic, group, n = "fault.hubkill", "workers", 20
	const ackTimeout = 3 * time.Second
	ca, err := client.Dial(t.Context(), fmt.Sprintf("ws://127.0.0.1:%d", wsA), client.Config{NoReconnect: true})
	if err != nil {
		t.Fatalf("dial a: %v (log: %s)", err, aLog.String())
	}
	defer ca.Close()
	cb, err := client.Dial(t.Context(), fmt.Sprintf("ws://127.0.0.1:%d", wsB), client.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()

	var mu sync.Mutex
	held := map[string]uint64{} // id → seq, delivered through hub a, never acked
	_, err = ca.Subscribe(t.Context(), topic, group, func(_ context.Context, dl facade.Delivery) error {
		e := dl.Event()
		mu.Lock()
		held[e.ID] = e.Seq
		mu.Unlock()
		return nil
	}, facade.SubscribeOptions{From: facade.FromEarliest, ManualAck: true, AckTimeoutMs: ackTimeout.Milliseconds(), MaxInFlight: n})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := cb.Publish(t.Context(), topic, json.RawMessage(strconv.Itoa(i)), facade.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.CheckFor(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(held) < n {
			return fmt.Errorf("hub a's client holds %d of %d", len(held), n)
		}
		return nil
	})

	_ = a.Process.Kill() // kill -9: no hand-back
	_ = a.Wait()
	killed := time.Now()

	got := make(chan facade.Delivery, 2*n)
	_, err = cb.Subscribe(t.Context(), topic, group, func(_ context.Context, dl facade.Delivery) error {
		got <- dl
		return nil
	}, facade.SubscribeOptions{ManualAck: true, AckTimeoutMs: ackTimeout.Milliseconds(), MaxInFlight: n})
	if err != nil {
		t.Fatal(err)
	}
	// The cursor stays before every unacknowledged event.
	cur, err := cb.GetCursor(t.Context(), topic, group)
	if err != nil {
		t.Fatal(err)
	}
	for id, seq := range held {
		if cur.LastSeq >= seq {
			t.Fatalf("the cursor (%d) passed %s (seq %d), which no one acknowledged", cur.LastSeq, id, seq)
		}
	}
	recovered := map[string]bool{}
	limit := time.After(ackTimeout + time.Second + 10*time.Second) // ack wait + gateway margin + slack for a loaded machine
	for len(recovered) < n {
		select {
		case d := <-got:
			if _, ok := held[d.Event().ID]; ok {
				recovered[d.Event().ID] = true
			}
			if err := d.Ack(t.Context()); err != nil {
				t.Fatal(err)
			}
		case <-limit:
			t.Fatalf("hub b's member got %d of the %d events hub a held", len(recovered), n)
		}
	}
	t.Logf("hub killed holding %d deliveries: all %d redelivered through the other hub %v after the kill (ack timeout %v), 0 lost",
		n, len(recovered), time.Since(killed).Round(time.Millisecond), ackTimeout)
}
