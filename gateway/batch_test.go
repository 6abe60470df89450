package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/internal/wsbatch"
	"github.com/eventhub/eventhub/wire"
)

// batchTransport serves one WebSocket connection whose transport has the
// frames of queue queued before its writer starts, batching as batch says,
// and returns the client's end.
func batchTransport(t *testing.T, batch bool, queue ...[]byte) *websocket.Conn {
	t.Helper()
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var bc *wsbatch.Conn
		var brw *bufio.ReadWriter
		ws, err := up.Upgrade(hijackWrapper{w, &bc, &brw}, r, nil)
		if err != nil {
			return
		}
		tr := newWSTransport(ws, bc, len(queue)+1, 5*time.Second, time.Minute, slog.New(slog.DiscardHandler))
		tr.SetBatch(batch)
		for _, b := range queue {
			if tr.SendShared(b) != sent {
				t.Errorf("queue refused a frame")
			}
		}
		go tr.run()
		go func() {
			// Read until the client goes, then end the transport.
			for {
				if _, _, err := ws.NextReader(); err != nil {
					tr.Abort(wire.CloseNormal, "")
					return
				}
			}
		}()
		<-tr.done
	}))
	t.Cleanup(srv.Close)
	c, _, err := dialRaw(t, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func okFrame(i int) []byte { return wire.AppendOK(nil, strconv.Itoa(i)) }

// readMessages reads messages until n frames arrived.
func readMessages(t *testing.T, c *websocket.Conn, n int) []string {
	t.Helper()
	var msgs []string
	frames := 0
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for frames < n {
		_, data, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("after %d frames: %v", frames, err)
		}
		msgs = append(msgs, string(data))
		if !wire.IsBatch(data) {
			frames++
			continue
		}
		if err := wire.SplitBatch(data, func([]byte) bool { frames++; return true }); err != nil {
			t.Fatalf("batch %q: %v", data, err)
		}
	}
	return msgs
}

// TestTransportBatches: with batching on, the frames queued when the writer
// wakes go out as one array, bounded by wire.BatchMaxFrames and
// wire.BatchMaxBytes; a lone frame is sent bare; without batching every
// frame is its own message.
func TestTransportBatches(t *testing.T) {
	t.Run("coalesced", func(t *testing.T) {
		c := batchTransport(t, true, okFrame(1), okFrame(2), okFrame(3))
		msgs := readMessages(t, c, 3)
		want := `[{"op":"OK","corr":"1"},{"op":"OK","corr":"2"},{"op":"OK","corr":"3"}]`
		if len(msgs) != 1 || msgs[0] != want {
			t.Fatalf("messages %q, want %q", msgs, want)
		}
	})
	t.Run("one frame is bare", func(t *testing.T) {
		msgs := readMessages(t, batchTransport(t, true, okFrame(1)), 1)
		if len(msgs) != 1 || msgs[0] != `{"op":"OK","corr":"1"}` {
			t.Fatalf("messages %q", msgs)
		}
	})
	t.Run("off", func(t *testing.T) {
		msgs := readMessages(t, batchTransport(t, false, okFrame(1), okFrame(2)), 2)
		if len(msgs) != 2 || msgs[0] != `{"op":"OK","corr":"1"}` || msgs[1] != `{"op":"OK","corr":"2"}` {
			t.Fatalf("messages %q", msgs)
		}
	})
	t.Run("count bound", func(t *testing.T) {
		n := wire.BatchMaxFrames + 10
		q := make([][]byte, n)
		for i := range q {
			q[i] = okFrame(i)
		}
		msgs := readMessages(t, batchTransport(t, true, q...), n)
		if len(msgs) != 2 {
			t.Fatalf("%d messages, want 2", len(msgs))
		}
		var first []json.RawMessage
		if err := json.Unmarshal([]byte(msgs[0]), &first); err != nil || len(first) != wire.BatchMaxFrames {
			t.Fatalf("first batch: %d frames, err %v", len(first), err)
		}
	})
	t.Run("size bound", func(t *testing.T) {
		big := wire.AppendErr(nil, "", "x", strings.Repeat("m", wire.BatchMaxBytes/2))
		huge := wire.AppendErr(nil, "", "x", strings.Repeat("m", wire.BatchMaxBytes))
		msgs := readMessages(t, batchTransport(t, true, big, big, huge, okFrame(1), okFrame(2)), 5)
		for i, m := range msgs {
			if wire.IsBatch([]byte(m)) && len(m) > wire.BatchMaxBytes {
				t.Errorf("message %d: a batch of %d bytes", i, len(m))
			}
		}
		if len(msgs) != 4 || msgs[2] != string(huge) || msgs[3] != `[{"op":"OK","corr":"1"},{"op":"OK","corr":"2"}]` {
			t.Fatalf("%d messages; the last %q", len(msgs), msgs[len(msgs)-1])
		}
	})
}

// TestBatchNegotiated: an AUTH with "batch":true turns batching on for the
// connection, both ways: the client may send a batch of ACKs (each answered
// as if sent alone, a bad frame among them refused alone). A client that
// does not ask gets no batches, and an array from it is bad_frame as ever.
func TestBatchNegotiated(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{Token: "tok"})
	batching := func(c *wsClient) bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		for s, tr := range g.sessions {
			if s.meta.remote == c.c.LocalAddr().String() {
				return tr.(*wsTransport).batch.Load()
			}
		}
		t.Fatal("no session for the client")
		return false
	}
	await := func(c *wsClient, pred func(wire.Frame) bool, what string) wire.Frame {
		t.Helper()
		f, ok := c.await(5*time.Second, pred)
		if !ok {
			t.Fatalf("no %s", what)
		}
		return f
	}

	plain := dialAuth(t, g.url, "tok")
	if batching(plain) {
		t.Fatal("batching on without asking")
	}
	plain.sendRaw(`[{"op":"ACK","corr":"k","topic":"bn.t","group":"g","id":"x"}]`)
	if f := await(plain, func(f wire.Frame) bool { return f.Op == wire.OpErr }, "ERR"); f.Code != wire.CodeBadFrame {
		t.Fatalf("array without batching: ERR %s (%s), want bad_frame", f.Code, f.Msg)
	}

	c := dial(t, g.url)
	c.ok(wire.Frame{Op: wire.OpAuth, Token: "tok", Batch: true})
	if !batching(c) {
		t.Fatal("AUTH with batch did not turn batching on")
	}
	const n = 50
	for i := range n {
		publish(t, bus, "bn.t", strconv.Itoa(i))
	}
	c.ok(subscribeFrame("bn.t", "g", `{"from":"earliest"}`))
	acks := make([]string, 0, n)
	for i := range n {
		ev := await(c, func(f wire.Frame) bool { return f.Op == wire.OpEvent }, fmt.Sprintf("EVENT %d", i))
		if string(ev.Event.Payload) != strconv.Itoa(i) {
			t.Fatalf("event %d: payload %s", i, ev.Event.Payload)
		}
		a := ackFrame(ev)
		a.Corr = "a" + strconv.Itoa(i)
		b, err := wire.Encode(&a)
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, string(b))
	}
	c.mu.Lock()
	t.Logf("%d events in %d batched messages", n, c.batches)
	c.mu.Unlock()
	// Every ACK of one message answered, in order; the bad frame in the
	// middle gets its own ERR.
	c.sendRaw("[" + strings.Join(acks[:n/2], ",") + `,{"op":7,"corr":"bad"},` + strings.Join(acks[n/2:], ",") + "]")
	for i := range n {
		corr := "a" + strconv.Itoa(i)
		if f := await(c, func(f wire.Frame) bool { return f.Corr == corr }, "answer "+corr); f.Op != wire.OpOK {
			t.Fatalf("%s: %s %s (%s)", corr, f.Op, f.Code, f.Msg)
		}
	}
	if f := await(c, func(f wire.Frame) bool { return f.Op == wire.OpErr }, "ERR of the bad frame"); f.Code != wire.CodeBadFrame {
		t.Fatalf("bad frame in a batch: ERR %s %q", f.Code, f.Corr)
	}
	// Acknowledged: nothing is redelivered.
	testutil.CheckFor(t, 10*time.Second, func() error {
		pos, err := bus.GetCursor(t.Context(), "bn.t", "g")
		if err != nil {
			return err
		}
		if pos.Pending != 0 {
			return fmt.Errorf("%d pending", pos.Pending)
		}
		return nil
	})
	// A batch of more frames than BatchMaxFrames is refused whole: none of
	// its frames is answered.
	tooMany := make([]string, wire.BatchMaxFrames+1)
	for i := range tooMany {
		tooMany[i] = `{"op":"CURSOR","corr":"many","topic":"bn.t","group":"g"}`
	}
	c.sendRaw("[" + strings.Join(tooMany, ",") + "]")
	if f := await(c, func(f wire.Frame) bool { return f.Op == wire.OpErr || f.Corr == "many" }, "ERR"); f.Op != wire.OpErr || f.Code != wire.CodeBadFrame {
		t.Fatalf("batch of %d frames: %s %s (%s), want ERR bad_frame", len(tooMany), f.Op, f.Code, f.Msg)
	}
	// A batch that is not one is refused whole.
	c.sendRaw(`[{"op":"ACK"},`)
	if f := await(c, func(f wire.Frame) bool { return f.Op == wire.OpErr }, "ERR"); f.Code != wire.CodeBadJSON {
		t.Fatalf("broken batch: ERR %s (%s), want bad_json", f.Code, f.Msg)
	}
	c.sendRaw(`[]`)
	if f := await(c, func(f wire.Frame) bool { return f.Op == wire.OpErr }, "ERR"); f.Code != wire.CodeBadFrame {
		t.Fatalf("empty batch: ERR %s (%s), want bad_frame", f.Code, f.Msg)
	}
	// A later AUTH without batch turns it off.
	c.ok(wire.Frame{Op: wire.OpAuth, Token: "tok"})
	if batching(c) {
		t.Fatal("batching still on after an AUTH without batch")
	}
}

// TestBatchAboveMaxFrameBytes: a client that asked for batches may send a
// message of up to BatchMaxBytes even where MaxFrameBytes is smaller (the
// Go client coalesces up to that); each frame of it is still held to
// MaxFrameBytes, and one above it is discarded alone.
func TestBatchAboveMaxFrameBytes(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{Token: "tok", MaxFrameBytes: 2048})
	c := dial(t, g.url)
	c.ok(wire.Frame{Op: wire.OpAuth, Token: "tok", Batch: true})
	pub := func(corr string, size int) string {
		return fmt.Sprintf(`{"op":"PUBLISH","corr":%q,"topic":"bl.t","payload":%q}`, corr, strings.Repeat("x", size))
	}
	const n = 40 // 40 frames of about 1 KiB: 40 KiB, past four times MaxFrameBytes
	frames := make([]string, 0, n+1)
	for i := range n {
		frames = append(frames, pub("p"+strconv.Itoa(i), 1000))
		if i == n/2 {
			frames = append(frames, pub("big", 3000))
		}
	}
	c.sendRaw("[" + strings.Join(frames, ",") + "]")
	for i := range n {
		corr := "p" + strconv.Itoa(i)
		f, ok := c.await(10*time.Second, func(f wire.Frame) bool { return f.Corr == corr })
		if !ok || f.Op != wire.OpOK {
			t.Fatalf("%s: %+v, want OK", corr, f)
		}
	}
	f, ok := c.await(5*time.Second, func(f wire.Frame) bool { return f.Op == wire.OpErr })
	if !ok || f.Code != wire.CodeFrameTooLarge {
		t.Fatalf("frame above MaxFrameBytes in a batch: %+v, want ERR frame_too_large", f)
	}
	// Without batching the limit stays MaxFrameBytes for the message.
	c.ok(wire.Frame{Op: wire.OpAuth, Token: "tok"})
	c.sendRaw(pub("alone", 3000))
	if f, ok := c.await(5*time.Second, func(f wire.Frame) bool { return f.Op == wire.OpErr }); !ok || f.Code != wire.CodeFrameTooLarge {
		t.Fatalf("frame above MaxFrameBytes without batching: %+v, want ERR frame_too_large", f)
	}
}
