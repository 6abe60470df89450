package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventhub/eventhub/client"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
)

// workload publishes through hub a over HTTP, each event with an id of its
// own and retried with that id until a 200 says it is stored, and consumes
// through hub b over WebSocket in one group, while the faults happen.
type workload struct {
	mu        sync.Mutex
	acked     []string
	lastAck   time.Time
	stall     time.Duration // the longest wait for an ack in this phase
	failed    int           // publish attempts that failed in this phase
	delivered map[string]int
	total     int // deliveries, redeliveries included
	// hold, while set, keeps each delivery's handler waiting until it is
	// closed: deliveries in flight when a hub restarts.
	hold chan struct{}
	held int
}

const faultTopic = "compose.faults"

func (w *workload) publish(ctx context.Context) {
	for n := 0; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("fault-%06d", n)
		for ctx.Err() == nil {
			if _, err := tryPublish(ctx, hubA, faultTopic, id); err == nil {
				break
			}
			w.mu.Lock()
			w.failed++
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
		if ctx.Err() != nil {
			// The last publish may or may not be stored: its id is not
			// counted as acknowledged, and the final count allows it.
			return
		}
		w.mu.Lock()
		now := time.Now()
		if d := now.Sub(w.lastAck); d > w.stall {
			w.stall = d
		}
		w.lastAck = now
		w.acked = append(w.acked, id)
		w.mu.Unlock()
		select { // about 50 events a second
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (w *workload) handle(ctx context.Context, d facade.Delivery) error {
	w.mu.Lock()
	hold := w.hold
	if hold != nil {
		w.held++
	}
	w.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
		}
		// Settled by the hub after its restart: the lease ends and the
		// event is delivered again.
		return errors.New("held across the hub's restart")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.delivered[d.Event().ID]++
	w.total++
	return nil
}

// counts are the acknowledged publishes and the distinct events delivered.
func (w *workload) counts() (acked, delivered int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked), len(w.delivered)
}

// phase resets the phase figures and returns the previous phase's.
func (w *workload) phase() (stall time.Duration, failed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	stall, failed = w.stall, w.failed
	w.stall, w.failed, w.lastAck = 0, 0, time.Now()
	return stall, failed
}

// progress waits until n more events have been acknowledged and delivered.
func (w *workload) progress(t *testing.T, n int) {
	t.Helper()
	a0, d0 := w.counts()
	testutil.CheckFor(t, 2*time.Minute, func() error {
		a, d := w.counts()
		if a < a0+n || d < d0+n {
			return fmt.Errorf("%d of %d more acknowledged, %d of %d more delivered", a-a0, n, d-d0, n)
		}
		return nil
	})
}

// clusterFaults stops the stream leader's container, cuts a NATS node off
// the compose network, restarts a hub with deliveries in flight, and
// restarts every NATS container in turn, while events flow; then every
// acknowledged event must be stored once and delivered.
func clusterFaults(t *testing.T, p *project) {
	w := &workload{delivered: map[string]int{}, lastAck: time.Now()}
	ctx, cancel := context.WithCancel(t.Context())
	c, err := client.Dial(ctx, hubB.ws, client.Config{Token: devToken, ReconnectMax: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, faultTopic, "faults", w.handle,
		facade.SubscribeOptions{From: facade.FromEarliest, AckTimeoutMs: 3000})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	defer sub.Stop(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.publish(ctx) })
	defer func() { cancel(); wg.Wait() }()
	w.progress(t, 50)
	w.phase()

	report := func(name string, d time.Duration) {
		stall, failed := w.phase()
		t.Logf("fault %-22s: the fault lasted %v; longest wait for a publish ack %v, %d failed publish attempts (retried)",
			name, d.Round(100*time.Millisecond), stall.Round(10*time.Millisecond), failed)
	}

	// 1. The stream leader's container stops, and comes back.
	var leader string
	testutil.CheckFor(t, 30*time.Second, func() error {
		info, err := stream(t, faultTopic)
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return errNoLeader
		}
		leader = info.Cluster.Leader
		return nil
	})
	start := time.Now()
	p.docker("stop", "-t", "5", p.container(leader))
	w.progress(t, 50)
	p.docker("start", p.container(leader))
	p.waitHealthy(leader, 2*time.Minute)
	w.progress(t, 20)
	report("stream leader stopped", time.Since(start))

	// 2. A NATS node is cut off the compose network (not nats1, whose
	// client port the native checks use), and joins again.
	node := "nats2"
	id := p.container(node)
	network := dockerInspect(t, id, `{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}`)
	start = time.Now()
	p.docker("network", "disconnect", network, id)
	w.progress(t, 100)
	p.docker("network", "connect", "--alias", node, network, id)
	p.waitHealthy(node, 2*time.Minute)
	w.progress(t, 20)
	report("nats2 partitioned", time.Since(start))

	// 3. The consumers' hub restarts with deliveries in flight.
	hold := make(chan struct{})
	w.mu.Lock()
	w.hold = hold
	w.mu.Unlock()
	testutil.CheckFor(t, 30*time.Second, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.held < 10 {
			return fmt.Errorf("%d deliveries held", w.held)
		}
		return nil
	})
	start = time.Now()
	p.docker("restart", "-t", "5", p.container("eventhub-b"))
	w.mu.Lock()
	w.hold = nil
	inFlight := w.held
	w.mu.Unlock()
	close(hold)
	p.waitHealthy("eventhub-b", 2*time.Minute)
	w.progress(t, 50)
	report("hub b restarted", time.Since(start))
	t.Logf("%d deliveries were in flight when hub b restarted", inFlight)

	// 4. Every NATS container restarts, one after the other.
	start = time.Now()
	for _, n := range []string{"nats1", "nats2", "nats3"} {
		p.docker("restart", "-t", "5", p.container(n))
		p.waitHealthy(n, 2*time.Minute)
		w.progress(t, 20)
	}
	report("rolling NATS restart", time.Since(start))

	cancel()
	wg.Wait()
	acked, _ := w.counts()
	testutil.CheckFor(t, 2*time.Minute, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, id := range w.acked {
			if w.delivered[id] == 0 {
				return fmt.Errorf("acknowledged event %s not delivered (%d of %d delivered)", id, len(w.delivered), len(w.acked))
			}
		}
		return nil
	})
	// Stored once: the stream holds each acknowledged event, and at most
	// the one publish that was on its way when the workload stopped.
	var msgs uint64
	testutil.CheckFor(t, 30*time.Second, func() error {
		info, err := stream(t, faultTopic)
		if err != nil {
			return err
		}
		msgs = info.State.Msgs
		return nil
	})
	if msgs < uint64(acked) || msgs > uint64(acked)+1 {
		t.Fatalf("the stream holds %d events for %d acknowledged publishes: lost or stored twice", msgs, acked)
	}
	w.mu.Lock()
	t.Logf("%d events acknowledged, %d stored, all delivered; %d deliveries in all, %d redeliveries",
		acked, msgs, w.total, w.total-len(w.delivered))
	w.mu.Unlock()
}

func dockerInspect(t *testing.T, id, format string) string {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "--format", format, id).CombinedOutput()
	if err != nil {
		t.Fatalf("docker inspect %s: %v\n%s", id, err, out)
	}
	return strings.TrimSpace(string(out))
}
