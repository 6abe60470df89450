package livebench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/centrifugal/centrifuge"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/gateway"
	"github.com/eventhub/eventhub/jetstream"
)

// server is one contestant's server, running in the benchmark process.
type server interface {
	// url is what the client process dials.
	url() string
	// publish sends one event to the topic; it may return before the
	// event is stored.
	publish(payload []byte) error
	// settle waits until every publish was stored.
	settle() error
	close()
}

func startServer(tb testing.TB, kind, topic string) server {
	tb.Helper()
	var (
		s   server
		err error
	)
	switch kind {
	case kindHub:
		s, err = startHub(topic)
	case kindCentrifuge:
		s, err = startCentrifuge(topic)
	case kindNATS:
		s, err = startNATS(topic)
	default:
		err = fmt.Errorf("unknown contestant %q", kind)
	}
	if err != nil {
		tb.Fatalf("start %s: %v", kind, err)
	}
	return s
}

// hubServer is the gateway over an embedded JetStream bus with memory
// storage; events are published to the bus, as HTTP or native NATS
// publishers would.
type hubServer struct {
	bus    *jetstream.Bus
	gw     *gateway.Gateway
	addr   string
	topic  string
	cancel context.CancelFunc
	served chan error
	futs   []facade.PublishFuture
}

func startHub(topic string) (*hubServer, error) {
	bus, err := jetstream.Open(context.Background(), jetstream.OpenConfig{Server: jetstream.ServerConfig{Memory: true, Port: -1}})
	if err != nil {
		return nil, err
	}
	// The stream exists before anyone follows the topic.
	if _, err := bus.Publish(context.Background(), topic, json.RawMessage(`{"t":0}`), facade.PublishOptions{}); err != nil {
		bus.Close()
		return nil, err
	}
	gw, err := gateway.New(bus, gateway.Config{})
	if err != nil {
		bus.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		bus.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &hubServer{bus: bus, gw: gw, addr: ln.Addr().String(), topic: topic, cancel: cancel, served: make(chan error, 1)}
	go func() { h.served <- gw.Serve(ctx, ln) }()
	return h, nil
}

func (h *hubServer) url() string { return "ws://" + h.addr }

func (h *hubServer) publish(p []byte) error {
	f, err := h.bus.PublishAsync(context.Background(), h.topic, p, facade.PublishOptions{})
	if err != nil {
		return err
	}
	h.futs = append(h.futs, f)
	return nil
}

func (h *hubServer) settle() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, f := range h.futs {
		if _, err := f.Wait(ctx); err != nil {
			return err
		}
	}
	h.futs = h.futs[:0]
	return nil
}

func (h *hubServer) close() {
	h.cancel()
	<-h.served
	h.bus.Close()
}

// centrifugeServer is a Centrifuge node with its in-memory broker and its
// WebSocket handler; every client may connect and subscribe to any
// channel. Publications keep a history (as the hub's stream does), so
// they carry their offset like the hub's events carry their seq.
type centrifugeServer struct {
	node    *centrifuge.Node
	srv     *http.Server
	addr    string
	topic   string
	served  chan error
	history []centrifuge.PublishOption
}

func startCentrifuge(topic string) (*centrifugeServer, error) {
	node, err := centrifuge.New(centrifuge.Config{LogLevel: centrifuge.LogLevelNone})
	if err != nil {
		return nil, err
	}
	node.OnConnecting(func(context.Context, centrifuge.ConnectEvent) (centrifuge.ConnectReply, error) {
		return centrifuge.ConnectReply{Credentials: &centrifuge.Credentials{UserID: "bench"}}, nil
	})
	node.OnConnect(func(c *centrifuge.Client) {
		c.OnSubscribe(func(_ centrifuge.SubscribeEvent, cb centrifuge.SubscribeCallback) {
			cb(centrifuge.SubscribeReply{}, nil)
		})
	})
	if err := node.Run(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = node.Shutdown(context.Background())
		return nil, err
	}
	ws := centrifuge.NewWebsocketHandler(node, centrifuge.WebsocketConfig{CheckOrigin: func(*http.Request) bool { return true }})
	c := &centrifugeServer{
		node: node, addr: ln.Addr().String(), topic: topic, served: make(chan error, 1),
		srv:     &http.Server{Handler: ws, ReadHeaderTimeout: 10 * time.Second},
		history: []centrifuge.PublishOption{centrifuge.WithHistory(10_000, 5*time.Minute)},
	}
	go func() { c.served <- c.srv.Serve(ln) }()
	return c, nil
}

func (c *centrifugeServer) url() string { return "ws://" + c.addr }

func (c *centrifugeServer) publish(p []byte) error {
	_, err := c.node.Publish(c.topic, p, c.history...)
	return err
}

func (c *centrifugeServer) settle() error { return nil }

func (c *centrifugeServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.node.Shutdown(ctx)
	_ = c.srv.Close()
	<-c.served
}

// natsServer is nats-server with JetStream (memory storage) and its
// WebSocket listener; a stream captures the topic, so a publish is stored
// as the hub's is, and the WebSocket clients subscribe to the subject
// with core NATS.
type natsServer struct {
	s     *natsserver.Server
	nc    *nats.Conn
	js    natsjs.JetStream
	wsURL string
	topic string
	futs  []natsjs.PubAckFuture
}

func startNATS(topic string) (*natsServer, error) {
	opts := &natsserver.Options{
		Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		JetStream: true, JetStreamMaxMemory: 1 << 30, StoreDir: "",
		Websocket: natsserver.WebsocketOpts{Host: "127.0.0.1", Port: -1, NoTLS: true},
	}
	s, err := natsserver.NewServer(opts)
	if err != nil {
		return nil, err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("nats-server not ready")
	}
	n := &natsServer{s: s, topic: topic, wsURL: fmt.Sprintf("ws://127.0.0.1:%d", opts.Websocket.Port)}
	if n.nc, err = nats.Connect("", nats.InProcessServer(s)); err != nil {
		n.close()
		return nil, err
	}
	if n.js, err = natsjs.New(n.nc); err != nil {
		n.close()
		return nil, err
	}
	if _, err := n.js.CreateStream(context.Background(), natsjs.StreamConfig{
		Name: "LIVEBENCH", Subjects: []string{topic}, Storage: natsjs.MemoryStorage,
	}); err != nil {
		n.close()
		return nil, err
	}
	return n, nil
}

func (n *natsServer) url() string { return n.wsURL }

func (n *natsServer) publish(p []byte) error {
	f, err := n.js.PublishAsync(n.topic, p)
	if err != nil {
		return err
	}
	n.futs = append(n.futs, f)
	return nil
}

func (n *natsServer) settle() error {
	for _, f := range n.futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		case <-time.After(time.Minute):
			return errors.New("publish not acknowledged")
		}
	}
	n.futs = n.futs[:0]
	return nil
}

func (n *natsServer) close() {
	if n.nc != nil {
		n.nc.Close()
	}
	n.s.Shutdown()
	n.s.WaitForShutdown()
}
