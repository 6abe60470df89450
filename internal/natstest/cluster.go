package natstest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/internal/testutil"
)

// ErrNoNetns: this machine cannot give the nodes network namespaces of
// their own (not root, no iproute2, not Linux).
var ErrNoNetns = errors.New("natstest: no network namespaces")

// Cluster is a NATS cluster of separate nats-server processes on loopback,
// with routes between all nodes and JetStream on file storage. Nodes can be
// killed (-9), stopped, started and restarted one at a time; each keeps its
// ports and store across restarts.
type Cluster struct {
	t       testing.TB
	bin     string
	cfg     ClusterConfig
	cleanup bool // the nodes are killed at cleanup
	Nodes   []*Node
}

// Node is one server of a Cluster.
type Node struct {
	Name                  string
	ClientPort, RoutePort int
	Dir                   string
	conf                  string
	net                   *nodeNet // nil: the node is on the machine's loopback
	mu                    sync.Mutex
	cmd                   *exec.Cmd
	exited                chan struct{} // closed once cmd has exited
	log                   *testutil.Buffer
}

// StartCluster starts n nodes (3 for JetStream quorum) and waits until
// JetStream answers through every node. They are killed at cleanup.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartClusterWith(t, n, ClusterConfig{})
}

// ClusterConfig tunes the nodes of a cluster.
type ClusterConfig struct {
	// SyncAlways makes every node flush each write to disk before it
	// acknowledges it (JetStream's sync_interval: always).
	SyncAlways bool
}

// StartClusterWith starts n nodes with cfg, as StartCluster does.
//
// The nodes' ports are found free and then bound by the nodes, and another
// process of a busy machine may take one in between: a node that cannot
// bind its port exits, and the cluster is then started again, on other
// ports and with empty stores.
func StartClusterWith(t testing.TB, n int, cfg ClusterConfig) *Cluster {
	t.Helper()
	c := newCluster(t, n)
	c.cfg = cfg
	for attempt := 1; ; attempt++ {
		for _, nd := range c.Nodes {
			nd.ClientPort, nd.RoutePort = freePort(t), freePort(t)
		}
		var routes []string
		for _, nd := range c.Nodes {
			routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", nd.RoutePort))
		}
		for _, nd := range c.Nodes {
			c.writeConf(nd, fmt.Sprintf("127.0.0.1:%d", nd.ClientPort), fmt.Sprintf("127.0.0.1:%d", nd.RoutePort), routes, false)
		}
		err := c.startAll()
		if err == nil {
			return c
		}
		if !errors.Is(err, errPortTaken) || attempt == 5 {
			t.Fatal(err)
		}
		t.Logf("%v; starting the cluster again on other ports", err)
		for i, nd := range c.Nodes {
			c.Kill(i)
			nd.Dir = t.TempDir()
		}
	}
}

// errPortTaken: a node exited because its port was taken.
var errPortTaken = errors.New("natstest: a node's port was taken")

func newCluster(t testing.TB, n int) *Cluster {
	c := &Cluster{t: t, bin: Binary(t)}
	for i := range n {
		c.Nodes = append(c.Nodes, &Node{Name: "n" + strconv.Itoa(i+1), Dir: t.TempDir()})
	}
	return c
}

// writeConf writes a node's configuration: clients on listen, routes on
// routeListen to every route URL, JetStream on file storage in its Dir.
// With noAdvertise, clients are told no other node's address: they use the
// URLs they were given.
func (c *Cluster) writeConf(nd *Node, listen, routeListen string, routes []string, noAdvertise bool) {
	c.t.Helper()
	sync := ""
	if c.cfg.SyncAlways {
		sync = "  sync_interval: always\n"
	}
	conf := fmt.Sprintf(`server_name: %s
listen: %s
cluster {
  name: eventhub-test
  listen: %s
  routes: [%s]
  no_advertise: %t
}
jetstream {
  store_dir: %q
%s}
`, nd.Name, listen, routeListen, strings.Join(routes, ", "), noAdvertise, nd.Dir, sync)
	nd.conf = filepath.Join(nd.Dir, "node.conf")
	if err := os.WriteFile(nd.conf, []byte(conf), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// startAll starts every node and waits until they are ready. The nodes
// are killed at cleanup.
func (c *Cluster) startAll() error {
	c.t.Helper()
	if !c.cleanup {
		c.cleanup = true
		c.t.Cleanup(func() {
			for i := range c.Nodes {
				c.Kill(i)
			}
		})
	}
	for i := range c.Nodes {
		c.startNode(i)
	}
	return c.waitReady()
}

// URL lists every node's client URL, for a client that fails over.
func (c *Cluster) URL() string {
	var us []string
	for _, nd := range c.Nodes {
		us = append(us, nd.URL())
	}
	return strings.Join(us, ",")
}

// URL is the node's client URL.
func (nd *Node) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(nd.ClientPort) }

func (c *Cluster) startNode(i int) {
	c.t.Helper()
	nd := c.Nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd != nil {
		return
	}
	nd.log = &testutil.Buffer{}
	nd.cmd = exec.Command(c.bin, "-c", nd.conf)
	if nd.net != nil {
		nd.cmd = exec.Command("ip", "netns", "exec", nd.net.ns, c.bin, "-c", nd.conf) // ip execs the server: same process
	}
	nd.cmd.Stdout, nd.cmd.Stderr = nd.log, nd.log
	if err := nd.cmd.Start(); err != nil {
		c.t.Fatalf("natstest: start %s: %v", nd.Name, err)
	}
	cmd, exited := nd.cmd, make(chan struct{})
	nd.exited = exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
}

// Start starts node i again (same ports and store).
func (c *Cluster) Start(i int) { c.startNode(i) }

// Kill ends node i with SIGKILL: no goodbye to clients or peers.
func (c *Cluster) Kill(i int) { c.signal(i, syscall.SIGKILL) }

// Stop ends node i gracefully (SIGTERM, lame duck skipped).
func (c *Cluster) Stop(i int) { c.signal(i, syscall.SIGTERM) }

// Restart stops node i gracefully and starts it again.
func (c *Cluster) Restart(i int) {
	c.Stop(i)
	c.Start(i)
}

func (c *Cluster) signal(i int, sig syscall.Signal) {
	nd := c.Nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd == nil || nd.cmd.Process == nil {
		return
	}
	_ = nd.cmd.Process.Signal(syscall.SIGCONT) // a paused node cannot act on SIGTERM
	_ = nd.cmd.Process.Signal(sig)
	<-nd.exited
	nd.cmd = nil
}

// Pause freezes node i (SIGSTOP): it keeps its sockets but answers no one,
// as a node cut off by a network partition does.
func (c *Cluster) Pause(i int) { c.freeze(i, syscall.SIGSTOP) }

// Resume lets a paused node i run again (SIGCONT): the partition heals.
func (c *Cluster) Resume(i int) { c.freeze(i, syscall.SIGCONT) }

func (c *Cluster) freeze(i int, sig syscall.Signal) {
	nd := c.Nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd != nil && nd.cmd.Process != nil {
		_ = nd.cmd.Process.Signal(sig)
	}
}

// Running reports whether node i runs.
func (c *Cluster) Running(i int) bool {
	nd := c.Nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.cmd != nil
}

// WaitReady waits until JetStream answers through every running node.
func (c *Cluster) WaitReady() {
	c.t.Helper()
	if err := c.waitReady(); err != nil {
		c.t.Fatal(err)
	}
}

// readyTimeout bounds how long a node may take to answer for JetStream: a
// node that starts, or rejoins, on a loaded machine first catches up with
// its peers, which can take tens of seconds.
const readyTimeout = 90 * time.Second

// waitReady is WaitReady, returning why a node is not ready: it exited
// (errPortTaken when its port was taken), or readyTimeout passed.
func (c *Cluster) waitReady() error {
	for _, nd := range c.Nodes {
		nd.mu.Lock()
		exited := nd.exited
		running := nd.cmd != nil
		nd.mu.Unlock()
		if !running {
			continue
		}
		deadline := time.Now().Add(readyTimeout)
		for {
			err := jsReady(nd.URL())
			if err == nil {
				break
			}
			select {
			case <-exited:
				log := nd.Log()
				if strings.Contains(log, "address already in use") {
					return fmt.Errorf("natstest: %s exited: %w", nd.Name, errPortTaken)
				}
				return fmt.Errorf("natstest: %s exited: %w\n%s", nd.Name, err, log)
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("natstest: %s: JetStream not ready within %v: %w\n%s", nd.Name, readyTimeout, err, nd.Log())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

func jsReady(url string) error {
	nc, err := nats.Connect(url, nats.Timeout(time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// Log is what node i's process printed.
func (nd *Node) Log() string {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.log == nil {
		return ""
	}
	return nd.log.String()
}

// StreamLeader is the index of the node that leads stream, or -1 while it
// has none.
func (c *Cluster) StreamLeader(stream string) int {
	for i, nd := range c.Nodes {
		if !c.Running(i) {
			continue
		}
		nc, err := nats.Connect(nd.URL(), nats.Timeout(time.Second))
		if err != nil {
			continue
		}
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := js.Stream(ctx, stream)
		cancel()
		nc.Close()
		if err != nil || s.CachedInfo().Cluster == nil {
			continue
		}
		for j, n := range c.Nodes {
			if n.Name == s.CachedInfo().Cluster.Leader {
				return j
			}
		}
		return -1
	}
	return -1
}
