package natstest

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// nodeNet is where a node of a partitionable cluster lives: a network
// namespace of its own, plugged into a switch (a bridge in one more
// namespace) by a veth pair. Nothing is added to the machine's own network:
// clients reach the node's loopback through forwarders that listen on the
// machine's loopback and dial from inside the node's namespace.
type nodeNet struct {
	ns, bridgeNS, port string
	// outside forwards the clients on the other side of a partition (the
	// hubs of a test): Partition cuts their connections. inside forwards a
	// client next to the node, which a partition does not separate from it.
	outside, inside *forwarder
}

var netnsSeq atomic.Int64

// StartPartitionableCluster starts n nodes as StartCluster does, but each in
// a network namespace of its own, so that Partition can cut one node off the
// network for real. It needs root and the ip command (iproute2); without
// them it returns an error wrapping ErrNoNetns and starts nothing. Every
// namespace it made is deleted at cleanup.
func StartPartitionableCluster(t testing.TB, n int) (*Cluster, error) {
	t.Helper()
	if uid := os.Geteuid(); uid != 0 {
		return nil, fmt.Errorf("%w: network namespaces need root, this is uid %d", ErrNoNetns, uid)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoNetns, err)
	}
	c := newCluster(t, n)
	prefix := fmt.Sprintf("ehtest-%d-%d", os.Getpid(), netnsSeq.Add(1))
	bridge := prefix + "-sw"
	var made []string
	t.Cleanup(func() {
		for _, ns := range slices.Backward(made) {
			if err := ip("netns", "del", ns); err != nil {
				t.Errorf("natstest: %v", err)
			}
		}
	})
	addNS := func(ns string) error {
		if err := ip("netns", "add", ns); err != nil {
			return err
		}
		made = append(made, ns)
		return nil
	}
	if err := addNS(bridge); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoNetns, err)
	}
	steps := [][]string{
		{"-n", bridge, "link", "add", "name", "br0", "type", "bridge"},
		{"-n", bridge, "link", "set", "br0", "up"},
	}
	var routes []string
	for i, nd := range c.Nodes {
		nd.net = &nodeNet{ns: prefix + "-" + nd.Name, bridgeNS: bridge, port: "p" + nd.Name}
		if err := addNS(nd.net.ns); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoNetns, err)
		}
		addr := "10.77.0." + strconv.Itoa(i+1)
		steps = append(steps,
			[]string{"-n", nd.net.ns, "link", "set", "lo", "up"},
			[]string{"-n", bridge, "link", "add", "name", nd.net.port, "type", "veth", "peer", "name", "eth0", "netns", nd.net.ns},
			[]string{"-n", bridge, "link", "set", nd.net.port, "master", "br0"},
			[]string{"-n", bridge, "link", "set", nd.net.port, "up"},
			[]string{"-n", nd.net.ns, "addr", "add", addr + "/24", "dev", "eth0"},
			[]string{"-n", nd.net.ns, "link", "set", "eth0", "up"},
		)
		routes = append(routes, "nats://"+addr+":6222")
		nd.RoutePort = 6222
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoNetns, err)
		}
	}
	for i, nd := range c.Nodes {
		c.writeConf(nd, "127.0.0.1:4222", "10.77.0."+strconv.Itoa(i+1)+":6222", routes, true)
		var err error
		if nd.net.outside, err = newForwarder(nd.net.ns, "127.0.0.1:4222"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nd.net.outside.close)
		if nd.net.inside, err = newForwarder(nd.net.ns, "127.0.0.1:4222"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nd.net.inside.close)
		nd.ClientPort = nd.net.outside.port()
	}
	if err := c.startAll(); err != nil {
		t.Fatal(err)
	}
	return c, nil
}

// Partition cuts node i off the network: its switch port goes down, so it
// no longer reaches the other nodes nor they it, and the connections of
// clients on the other side (those made through its URL) are reset. A
// client connected through its InsideURL stays with it.
func (c *Cluster) Partition(i int) {
	c.t.Helper()
	nd := c.Nodes[i]
	if nd.net == nil {
		c.t.Fatal("natstest: Partition needs a cluster from StartPartitionableCluster")
	}
	if err := ip("-n", nd.net.bridgeNS, "link", "set", nd.net.port, "down"); err != nil {
		c.t.Fatal(err)
	}
	nd.net.outside.sever(true)
}

// Heal plugs node i back in and lets clients reach it again.
func (c *Cluster) Heal(i int) {
	c.t.Helper()
	nd := c.Nodes[i]
	if nd.net == nil {
		c.t.Fatal("natstest: Heal needs a cluster from StartPartitionableCluster")
	}
	if err := ip("-n", nd.net.bridgeNS, "link", "set", nd.net.port, "up"); err != nil {
		c.t.Fatal(err)
	}
	nd.net.outside.sever(false)
}

// InsideURL is the URL of a client on the node's side of a partition. On a
// cluster that cannot be partitioned it is the node's URL.
func (nd *Node) InsideURL() string {
	if nd.net == nil {
		return nd.URL()
	}
	return "nats://127.0.0.1:" + strconv.Itoa(nd.net.inside.port())
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// forwarder listens on the machine's loopback and connects each client to
// target as seen from inside network namespace ns.
type forwarder struct {
	ln         net.Listener
	ns, target string
	wg         sync.WaitGroup
	mu         sync.Mutex
	severed    bool
	closed     bool
	conns      map[net.Conn]struct{}
}

func newForwarder(ns, target string) (*forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("natstest: forwarder: %w", err)
	}
	f := &forwarder{ln: ln, ns: ns, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Go(f.serve)
	return f, nil
}

func (f *forwarder) port() int { return f.ln.Addr().(*net.TCPAddr).Port }

func (f *forwarder) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		if !f.track(c) {
			continue
		}
		f.wg.Go(func() { f.pipe(c) })
	}
}

// track registers c, or closes it when the forwarder is severed or closed.
func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.severed || f.closed {
		_ = c.Close()
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
		delete(f.conns, c)
	}
}

func (f *forwarder) pipe(c net.Conn) {
	up, err := dialIn(f.ns, f.target)
	if err != nil {
		f.untrack(c)
		return
	}
	if !f.track(up) {
		f.untrack(c)
		return
	}
	f.wg.Go(func() {
		_, _ = io.Copy(up, c)
		f.untrack(c, up)
	})
	_, _ = io.Copy(c, up)
	f.untrack(c, up)
}

// sever resets every connection and refuses new ones (on), or accepts
// again (off).
func (f *forwarder) sever(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.severed = on
	if on {
		for c := range f.conns {
			_ = c.Close()
			delete(f.conns, c)
		}
	}
}

func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	_ = f.ln.Close()
	for c := range f.conns {
		_ = c.Close()
		delete(f.conns, c)
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// dialIn connects to addr from inside network namespace ns. The socket is
// made by a thread that enters ns and is never used again: its goroutine
// ends while locked to it, so the runtime ends the thread too.
func dialIn(ns, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked, on purpose
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{err: fmt.Errorf("natstest: open namespace %s: %w", ns, err)}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("natstest: enter namespace %s: %w", ns, err)}
			return
		}
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}
