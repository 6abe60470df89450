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

// openOnCluster opens a bus (a hub's) on the cluster, with its default
// replicas: 3 on a cluster of three.
func openOnCluster(t *testing.T, c *natstest.Cluster) *jetstream.Bus {
	t.Helper()
	b, err := jetstream.Open(t.Context(), jetstream.OpenConfig{
		URL:         c.URL(),
		NATSOptions: []nats.Option{nats.ReconnectWait(100 * time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestPublishesRideThroughLeaderKills kills the stream's leader (kill -9)
// five times during 50,000 publishes through two hubs (about a minute under
// the race detector on 2 cores), half the workers with ids of their own and
// half with ids the hub makes: every acknowledged event must be in the
// stream exactly once, and clients should see latency, not errors. The
// hub's retries of its own ids are deduplicated because a publish to a
// replicated stream carries Nats-Msg-Id from its first attempt.
func TestPublishesRideThroughLeaderKills(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	hubs := []*jetstream.Bus{openOnCluster(t, c), openOnCluster(t, c)}
	const topic, workersPerHub, perWorker, kills = "fault.leader", 2, 12500, 5
	total := len(hubs) * workersPerHub * perWorker
	pub(t, hubs[0], topic, `{"warmup":true}`, "") // creates the R3 stream
	ti, err := hubs[0].LookupTopic(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	stream := ti.StreamName
	info, err := ti.Stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 3 {
		t.Fatalf("a stream created on a three-node cluster without a replicas setting has %d replicas, want 3", info.Config.Replicas)
	}

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
					o := facade.PublishOptions{ID: id}
					if w%2 == 1 {
						o.ID = "" // the hub makes the id
					}
					t0 := time.Now()
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					e, err := b.Publish(ctx, topic, json.RawMessage(`{"n":1}`), o)
					cancel()
					d := time.Since(t0)
					if err != nil {
						nErrors.Add(1)
						t.Logf("publish %s failed after %v: %v", id, d, err)
						continue
					}
					acked.Store(e.ID, true)
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
		// The next kill waits until the node is a current replica again:
		// killing a second node of three before the first rejoined leaves
		// no quorum, and no leader can be elected until it is back.
		c.WaitReady()
		waitReplicasCurrent(t, ti.Stream)
	}
	wg.Wait()
	c.WaitReady()

	seen, noMsgID := streamIDs(t, c, stream)
	if noMsgID != 0 {
		t.Errorf("%d events published to a replicated stream without Nats-Msg-Id", noMsgID)
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

// streamIDs reads a stream back through a plain NATS client and counts its
// messages by event id (the hub's id header), and those without
// Nats-Msg-Id. Right after a node restart the stream may still be electing
// its leader: the read is tried again until it goes through.
func streamIDs(t *testing.T, c *natstest.Cluster, stream string) (ids map[string]int, noMsgID int) {
	t.Helper()
	nc, err := nats.Connect(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := njs.New(nc)
	var seen map[string]int
	testutil.CheckFor(t, 60*time.Second, func() error {
		seen, noMsgID = map[string]int{}, 0
		s, err := js.Stream(t.Context(), stream)
		if err != nil {
			return err
		}
		info, err := s.Info(t.Context())
		if err != nil {
			return err
		}
		cons, err := s.OrderedConsumer(t.Context(), njs.OrderedConsumerConfig{})
		if err != nil {
			return err
		}
		for n := uint64(0); n < info.State.Msgs; {
			batch, err := cons.Fetch(500, njs.FetchMaxWait(5*time.Second))
			if err != nil {
				return err
			}
			got := 0
			for m := range batch.Messages() {
				n++
				got++
				seen[m.Headers().Get(jetstream.HeaderID)]++
				if m.Headers().Get(jetstream.HeaderMsgID) == "" {
					noMsgID++
				}
			}
			if batch.Error() != nil {
				return batch.Error()
			}
			if got == 0 {
				return fmt.Errorf("read %d of %d messages", n, info.State.Msgs)
			}
		}
		return nil
	})
	return seen, noMsgID
}

// TestRollingRestartWhilePublishingAndConsuming restarts the three nodes
// one after the other while both hubs publish and a group consumes through
// both: clients see at most retries, nothing acknowledged is lost, and the
// group receives every event.
func TestRollingRestartWhilePublishingAndConsuming(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	hubs := []*jetstream.Bus{openOnCluster(t, c), openOnCluster(t, c)}
	const topic = "fault.rolling"
	pub(t, hubs[0], topic, `{"warmup":true}`, "")
	ti, err := hubs[0].LookupTopic(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var consumed sync.Map
	var nConsumed atomic.Int64
	for _, b := range hubs {
		unsub, err := b.Subscribe(t.Context(), topic, "rolling", func(_ context.Context, dl facade.Delivery) error {
			e := dl.Event()
			if _, dup := consumed.LoadOrStore(e.ID, true); !dup {
				nConsumed.Add(1)
			}
			return nil
		}, facade.SubscribeOptions{From: facade.FromEarliest, AckTimeoutMs: 5000})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unsub.Stop(context.Background()) })
	}
	p := startPublishers(t, hubs, topic, "r")
	acked, nAcked, nErrors := &p.acked, &p.nAcked, &p.nErrors
	for i := range c.Nodes {
		before := nAcked.Load()
		testutil.CheckFor(t, 60*time.Second, func() error {
			if nAcked.Load() < before+300 {
				return fmt.Errorf("publishing resumed: %d", nAcked.Load()-before)
			}
			return nil
		})
		c.Restart(i)
		c.WaitReady()
	}
	before := nAcked.Load()
	testutil.CheckFor(t, 60*time.Second, func() error {
		if nAcked.Load() < before+300 {
			return fmt.Errorf("publishing after the last restart: %d", nAcked.Load()-before)
		}
		return nil
	})
	p.stop()
	seen, _ := streamIDs(t, c, ti.StreamName)
	lost := 0
	acked.Range(func(k, _ any) bool {
		if seen[k.(string)] != 1 {
			lost++
		}
		return true
	})
	testutil.CheckFor(t, 60*time.Second, func() error {
		if n := nConsumed.Load(); n < nAcked.Load()+1 { // +1: the warm-up event
			return fmt.Errorf("group consumed %d of %d", n, nAcked.Load()+1)
		}
		return nil
	})
	t.Logf("rolling restart of 3 nodes: %d acknowledged publishes, %d errors seen by clients, %d lost or stored twice, %d consumed by the group",
		nAcked.Load(), nErrors.Load(), lost, nConsumed.Load())
	if lost != 0 {
		t.Fatalf("%d acknowledged events lost or stored twice", lost)
	}
	if e := nErrors.Load(); e > nAcked.Load()/100 {
		t.Fatalf("%d publishes failed during a rolling restart", e)
	}
}

// TestPartitionedLeaderCannotAcknowledge cuts the stream's leader off the
// network while both hubs publish: each node runs in a network namespace of
// its own, and the leader's switch port goes down. The hubs are on the
// majority's side. A client left alone with the cut-off node gets no
// acknowledgement, the majority elects a new leader and goes on, and once
// the partition heals the node rejoins and nothing acknowledged is lost or
// stored twice. Where this machine cannot make network namespaces (not
// root, no iproute2) the leader is frozen instead (SIGSTOP: it keeps its
// connections but answers no one), and the test says so.
func TestPartitionedLeaderCannotAcknowledge(t *testing.T) {
	c, err := natstest.StartPartitionableCluster(t, 3)
	var partition, heal func(int)
	how := "cut off the network (its own network namespace, switch port down)"
	if err == nil {
		partition, heal = c.Partition, c.Heal
	} else {
		t.Logf("no real partition here, the leader is frozen (SIGSTOP) instead: %v", err)
		c = natstest.StartCluster(t, 3)
		partition, heal, how = c.Pause, c.Resume, "frozen (SIGSTOP, standing in for a partition)"
	}
	hubs := []*jetstream.Bus{openOnCluster(t, c), openOnCluster(t, c)}
	const topic = "fault.partition"
	pub(t, hubs[0], topic, `{"warmup":true}`, "")
	ti, err := hubs[0].LookupTopic(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	p := startPublishers(t, hubs, topic, "p")
	acked, nAcked, nErrors := &p.acked, &p.nAcked, &p.nErrors
	waitMore := func(k int64) {
		before := nAcked.Load()
		testutil.CheckFor(t, 60*time.Second, func() error {
			if nAcked.Load() < before+k {
				return fmt.Errorf("%d more acknowledged", nAcked.Load()-before)
			}
			return nil
		})
	}
	waitMore(300)
	// The leader as one look finds it: a loaded machine may be electing one
	// (heartbeats missed), or answer the look after its own timeout.
	leader := -1
	testutil.CheckFor(t, 30*time.Second, func() error {
		if leader = c.StreamLeader(ti.StreamName); leader < 0 {
			return fmt.Errorf("stream %s has no leader", ti.StreamName)
		}
		return nil
	})
	// A client on the leader's side of the partition, connected to it alone.
	mnc, err := nats.Connect(c.Nodes[leader].InsideURL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.Timeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer mnc.Close()
	mjs, _ := njs.New(mnc)

	cut := time.Now()
	partition(leader)
	newLeader := -1
	testutil.CheckFor(t, 60*time.Second, func() error {
		if newLeader = c.StreamLeader(ti.StreamName); newLeader < 0 || newLeader == leader {
			return fmt.Errorf("the majority has not elected a leader yet")
		}
		return nil
	})
	elected := time.Since(cut)
	waitMore(300) // the majority goes on without it

	minorityAcks, minority := 0, "not tried (a frozen node answers no client)"
	if c.Nodes[leader].InsideURL() != c.Nodes[leader].URL() {
		minority = "3 tried"
		for i := range 3 {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			_, err := mjs.Publish(ctx, topic, []byte(`{"side":"minority"}`), njs.WithMsgID(fmt.Sprintf("minority-%d", i)))
			cancel()
			if err == nil {
				minorityAcks++
			} else {
				t.Logf("publish through the cut-off node alone: %v", err)
			}
		}
	}
	heal(leader)
	healed := time.Now()
	waitMore(300)
	c.WaitReady()
	// The node rejoins: every replica current again, while the hubs go on
	// publishing (as they would), which also keeps the leader sending it
	// what it missed.
	waitReplicasCurrent(t, ti.Stream)
	rejoined := time.Since(healed)
	p.stop()
	seen, _ := streamIDs(t, c, ti.StreamName)
	bad := 0
	acked.Range(func(k, _ any) bool {
		if seen[k.(string)] != 1 {
			bad++
		}
		return true
	})
	dup := 0
	for _, n := range seen {
		if n > 1 {
			dup++
		}
	}
	t.Logf("stream leader %s: new leader %v after the cut; publishes through the cut-off node alone: %s, %d acknowledged; rejoined %v after healing; %d acknowledged through the hubs, %d errors seen by their clients, %d lost or stored twice, %d stored twice in all",
		how, elected.Round(time.Millisecond), minority, minorityAcks, rejoined.Round(time.Millisecond), nAcked.Load(), nErrors.Load(), bad, dup)
	if minorityAcks != 0 {
		t.Errorf("the cut-off node acknowledged %d publishes without a quorum", minorityAcks)
	}
	if bad != 0 || dup != 0 {
		t.Fatalf("%d acknowledged events lost or stored twice, %d stored twice in all", bad, dup)
	}
	if e := nErrors.Load(); e > nAcked.Load()/100 {
		t.Fatalf("%d publishes failed", e)
	}
}

// waitReplicasCurrent waits until both replicas of an R3 stream are
// online and current.
func waitReplicasCurrent(t *testing.T, s njs.Stream) {
	t.Helper()
	testutil.CheckFor(t, 90*time.Second, func() error {
		info, err := s.Info(t.Context())
		if err != nil {
			return err
		}
		if info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			return fmt.Errorf("stream cluster %+v", info.Cluster)
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current || r.Offline {
				return fmt.Errorf("replica %s not current", r.Name)
			}
		}
		return nil
	})
}

// publishers publish to a topic through every hub, one goroutine each, with
// ids of their own (a retry by the hub is the same event), until stop.
type publishers struct {
	acked           sync.Map // id → true for every acknowledged publish
	nAcked, nErrors atomic.Int64
	done            chan struct{}
	stopOnce        sync.Once
	wg              sync.WaitGroup
}

func startPublishers(t *testing.T, hubs []*jetstream.Bus, topic, prefix string) *publishers {
	p := &publishers{done: make(chan struct{})}
	t.Cleanup(p.stop) // also when the test fails early
	for h, b := range hubs {
		p.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-p.done:
					return
				default:
				}
				id := fmt.Sprintf("%s%d-%d", prefix, h, i)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				_, err := b.Publish(ctx, topic, json.RawMessage(`{"n":1}`), facade.PublishOptions{ID: id})
				cancel()
				if err != nil {
					p.nErrors.Add(1)
					t.Logf("publish %s: %v", id, err)
					continue
				}
				p.acked.Store(id, true)
				p.nAcked.Add(1)
			}
		})
	}
	return p
}

func (p *publishers) stop() {
	p.stopOnce.Do(func() { close(p.done) })
	p.wg.Wait()
}
