package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/wire"
)

func TestMain(m *testing.M) {
	os.Exit(testutil.RunCheckingLeaks(m, 5*time.Second, "eventhub/gateway."))
}

// newBus starts an embedded NATS server with JetStream for one test.
func newBus(t testing.TB, mod ...func(*jetstream.OpenConfig)) *jetstream.Bus {
	t.Helper()
	oc := jetstream.OpenConfig{Server: jetstream.ServerConfig{DataDir: t.TempDir(), Port: -1}}
	for _, m := range mod {
		m(&oc)
	}
	b, err := jetstream.Open(context.Background(), oc)
	if err != nil {
		t.Fatalf("open bus: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// testGateway is a gateway served on a loopback port.
type testGateway struct {
	*Gateway
	url  string // ws://127.0.0.1:port
	http string // http://127.0.0.1:port
}

func newGateway(t testing.TB, bus facade.Bus, cfg Config) *testGateway {
	t.Helper()
	g, err := New(bus, cfg)
	if err != nil {
		t.Fatalf("new gateway: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- g.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	addr := ln.Addr().String()
	return &testGateway{Gateway: g, url: "ws://" + addr, http: "http://" + addr}
}

// wsClient is a raw protocol client for tests: a reader goroutine collects
// frames, the test goroutine awaits them.
type wsClient struct {
	t    testing.TB
	c    *websocket.Conn
	corr atomic.Int64

	mu     sync.Mutex
	frames []wire.Frame
	raw    []string
	// batches counts the batched messages received.
	batches int
	notify  chan struct{}
	closed  error // the read error, once reading stopped
	done    chan struct{}
}

func dialRaw(t testing.TB, url string, h http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	return d.Dial(url, h)
}

// dial connects without authenticating.
func dial(t testing.TB, url string) *wsClient {
	t.Helper()
	c, _, err := dialRaw(t, url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	return newWSClient(t, c)
}

func newWSClient(t testing.TB, c *websocket.Conn) *wsClient {
	w := &wsClient{t: t, c: c, notify: make(chan struct{}, 1), done: make(chan struct{})}
	go w.readLoop()
	t.Cleanup(func() {
		c.Close()
		<-w.done
	})
	return w
}

// dialAuth connects and authenticates with token.
func dialAuth(t testing.TB, url, token string) *wsClient {
	t.Helper()
	w := dial(t, url)
	w.ok(wire.Frame{Op: wire.OpAuth, Token: token})
	return w
}

func (w *wsClient) readLoop() {
	defer close(w.done)
	for {
		_, data, err := w.c.ReadMessage()
		w.mu.Lock()
		if err != nil {
			w.closed = err
			w.mu.Unlock()
			w.wake()
			return
		}
		if wire.IsBatch(data) {
			// Only a client that asked for batches gets them.
			w.batches++
			if err := wire.SplitBatch(data, func(b []byte) bool {
				w.frames = append(w.frames, parseFrame(b))
				w.raw = append(w.raw, string(b))
				return true
			}); err != nil {
				w.frames = append(w.frames, wire.Frame{Op: "UNPARSEABLE", Msg: string(data)})
			}
		} else {
			w.frames = append(w.frames, parseFrame(data))
			w.raw = append(w.raw, string(data))
		}
		w.mu.Unlock()
		w.wake()
	}
}

func parseFrame(data []byte) wire.Frame {
	var f wire.Frame
	if err := json.Unmarshal(data, &f); err != nil {
		f = wire.Frame{Op: "UNPARSEABLE", Msg: string(data)}
	}
	return f
}

func (w *wsClient) wake() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *wsClient) sendRaw(s string) {
	w.t.Helper()
	if err := w.c.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		w.t.Fatalf("write: %v", err)
	}
}

func (w *wsClient) send(f wire.Frame) {
	w.t.Helper()
	b, err := wire.Encode(&f)
	if err != nil {
		w.t.Fatal(err)
	}
	w.sendRaw(string(b))
}

// await returns (and consumes) the first frame matching pred, waiting up to
// timeout. ok is false on timeout or when the connection closed first.
func (w *wsClient) await(timeout time.Duration, pred func(wire.Frame) bool) (wire.Frame, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		for i, f := range w.frames {
			if pred(f) {
				w.frames = append(w.frames[:i], w.frames[i+1:]...)
				w.mu.Unlock()
				return f, true
			}
		}
		closed := w.closed
		w.mu.Unlock()
		if closed != nil {
			return wire.Frame{}, false
		}
		select {
		case <-w.notify:
		case <-deadline.C:
			return wire.Frame{}, false
		}
	}
}

// request sends f with a fresh corr and returns the OK or ERR answering it.
func (w *wsClient) request(f wire.Frame) wire.Frame {
	w.t.Helper()
	f.Corr = fmt.Sprintf("c%d", w.corr.Add(1))
	w.send(f)
	r, ok := w.await(5*time.Second, func(r wire.Frame) bool { return (r.Op == wire.OpOK || r.Op == wire.OpErr) && r.Corr == f.Corr })
	if !ok {
		w.t.Fatalf("no answer to %s %s (closed: %v)", f.Op, f.Corr, w.closeErr())
	}
	return r
}

// ok is request expecting OK.
func (w *wsClient) ok(f wire.Frame) wire.Frame {
	w.t.Helper()
	r := w.request(f)
	if r.Op != wire.OpOK {
		w.t.Fatalf("%s: got ERR %s: %s", f.Op, r.Code, r.Msg)
	}
	return r
}

// errCode is request expecting ERR with code.
func (w *wsClient) errCode(f wire.Frame, code string) wire.Frame {
	w.t.Helper()
	r := w.request(f)
	if r.Op != wire.OpErr || r.Code != code {
		w.t.Fatalf("%s: got %s %s (%s), want ERR %s", f.Op, r.Op, r.Code, r.Msg, code)
	}
	return r
}

// event awaits the next EVENT (of any subscription).
func (w *wsClient) event(timeout time.Duration) (wire.Frame, bool) {
	return w.await(timeout, func(f wire.Frame) bool { return f.Op == wire.OpEvent })
}

func (w *wsClient) mustEvent() wire.Frame {
	w.t.Helper()
	f, ok := w.event(10 * time.Second)
	if !ok {
		w.t.Fatalf("no EVENT (closed: %v)", w.closeErr())
	}
	return f
}

// noEvent asserts that no EVENT arrives within d.
func (w *wsClient) noEvent(d time.Duration) {
	w.t.Helper()
	if f, ok := w.event(d); ok {
		w.t.Fatalf("unexpected EVENT %s attempt %d", f.Event.ID, f.Ctx.Attempt)
	}
}

func (w *wsClient) closeErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// waitClose waits for the connection to close and returns the close code
// (-1 when it was not a close frame).
func (w *wsClient) waitClose(timeout time.Duration) int {
	w.t.Helper()
	select {
	case <-w.done:
	case <-time.After(timeout):
		w.t.Fatalf("connection still open after %v", timeout)
	}
	var ce *websocket.CloseError
	if errors.As(w.closeErr(), &ce) {
		return ce.Code
	}
	return -1
}

func subscribeFrame(topic, group string, opts string) wire.Frame {
	f := wire.Frame{Op: wire.OpSubscribe, Topic: topic, Group: group}
	if opts != "" {
		f.Opts = json.RawMessage(opts)
	}
	return f
}

func ackFrame(ev wire.Frame) wire.Frame {
	return wire.Frame{Op: wire.OpAck, Topic: ev.Topic, Group: ev.Group, ID: ev.Event.ID}
}

func publish(t testing.TB, b facade.Publisher, topic string, payload string) *facade.EventRecord {
	t.Helper()
	rec, err := b.Publish(context.Background(), topic, json.RawMessage(payload), facade.PublishOptions{})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	return rec
}

// leasesLocked counts the leases of every subscription of s (s.mu held).
func (s *session) leasesLocked() int {
	n := 0
	for _, sub := range s.subs {
		n += len(sub.leases)
	}
	return n
}
