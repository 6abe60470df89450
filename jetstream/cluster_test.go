package jetstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
)

// openOnCluster opens a bus (a hub's) on the cluster, with R3 streams.
func openOnCluster(t *testing.T, c *natstest.Cluster) *jetstream.Bus {
	t.Helper()
	b, err := jetstream.Open(t.Context(), jetstream.OpenConfig{
		URL:         c.URL(),
		NATSOptions: []nats.Option{nats.ReconnectWait(100 * time.Millisecond)},
		Bus:         jetstream.Config{Replicas: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestPublishesRideThroughLeaderKills kills the stream's leader (kill -9)
// five times while two hubs publish: every acknowledged event must be in
// the stream exactly once, and clients should see latency, not errors.
func TestPublishesRideThroughLeaderKills(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	hubs := []*jetstream.Bus{openOnCluster(t, c), openOnCluster(t, c)}
	const topic, workersPerHub, perWorker, kills = "fault.leader", 2, 750, 5
	total := len(hubs) * workersPerHub * perWorker
	pub(t, hubs[0], topic, `{"warmup":true}`, "") // creates the R3 stream
	ti, err := hubs[0].LookupTopic(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	stream := ti.StreamName

	var (
		acked   sync.Map // id → true, for every publish the hub acknowledged
		nAcked  atomic.Int64
		nErrors atomic.Int64
		mu      sync.Mutex
		lat     []time.Duration
	)
	var wg sync.WaitGroup
	for h, b := range hubs {
		for w := range workersPerHub {
			wg.Go(func() {
				for i := range perWorker {
					id := fmt.Sprintf("h%d-w%d-%d", h, w, i)
					t0 := time.Now()
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					_, err := b.Publish(ctx, topic, json.RawMessage(`{"n":1}`), facade.PublishOptions{ID: id})
					cancel()
					d := time.Since(t0)
					if err != nil {
						nErrors.Add(1)
						t.Logf("publish %s failed after %v: %v", id, d, err)
						continue
					}
					acked.Store(id, true)
					nAcked.Add(1)
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
			})
		}
	}
	// Kill the leader each time another sixth of the events is in, and
	// bring the node back once a new leader leads.
	for k := range kills {
		threshold := int64(total * (k + 1) / (kills + 1))
		testutil.CheckFor(t, 90*time.Second, func() error {
			if nAcked.Load()+nErrors.Load() < threshold {
				return fmt.Errorf("%d of %d published", nAcked.Load(), threshold)
			}
			return nil
		})
		leader := -1
		testutil.CheckFor(t, 30*time.Second, func() error {
			if leader = c.StreamLeader(stream); leader < 0 {
				return fmt.Errorf("stream %s has no leader", stream)
			}
			return nil
		})
		c.Kill(leader)
		testutil.CheckFor(t, 30*time.Second, func() error {
			if l := c.StreamLeader(stream); l < 0 || l == leader {
				return fmt.Errorf("no new leader yet")
			}
			return nil
		})
		c.Start(leader)
	}
	wg.Wait()
	c.WaitReady()

	// Read the whole stream back through a plain NATS client.
	nc, err := nats.Connect(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := njs.New(nc)
	s, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := s.OrderedConsumer(t.Context(), njs.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for n := uint64(0); n < info.State.Msgs; {
		batch, err := cons.Fetch(500, njs.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			n++
			id := m.Headers().Get("Nats-Msg-Id")
			seen[id]++
		}
		if batch.Error() != nil {
			t.Fatal(batch.Error())
		}
	}
	lost, dup := 0, 0
	acked.Range(func(k, _ any) bool {
		if seen[k.(string)] == 0 {
			lost++
		}
		return true
	})
	for _, n := range seen {
		if n > 1 {
			dup++
		}
	}
	slices.Sort(lat)
	p99, worst := time.Duration(0), time.Duration(0)
	if len(lat) > 0 {
		p99, worst = lat[len(lat)*99/100], lat[len(lat)-1]
	}
	t.Logf("%d publishes through 2 hubs, %d leader kills: %d acknowledged, %d errors seen by clients, %d acknowledged events lost, %d stored twice; publish p99 %v, longest stall %v",
		total, kills, nAcked.Load(), nErrors.Load(), lost, dup, p99, worst)
	if lost != 0 || dup != 0 {
		t.Fatalf("%d acknowledged events lost, %d stored twice", lost, dup)
	}
	if e := nErrors.Load(); e > int64(total/100) {
		t.Fatalf("%d of %d publishes failed; they should ride through the elections", e, total)
	}
}
