package gateway

import (
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/eventhub/eventhub/internal/wsbatch"
	"github.com/eventhub/eventhub/wire"
)

// transport carries a session's frames to its client. It only writes and
// closes; the session's reader owns reading.
type transport interface {
	// Send queues one frame and takes ownership of buf (returned to
	// bufPool once written). It never blocks.
	Send(buf *[]byte) sendResult
	// SendNumbered is Send that also returns the frame's number: frames
	// are numbered from 1 in the order they are queued, and frame n may
	// have reached the client once Written() >= n (it is counted when its
	// write starts); while Written() < n it has not.
	SendNumbered(buf *[]byte) (sendResult, uint64)
	// SendShared queues one frame whose bytes are shared with other
	// transports (a live event encoded once for every subscriber): they
	// are only read, never recycled.
	SendShared(b []byte) sendResult
	// SendBacklog is SendShared for a live recovery's events, which may
	// queue up to the recovery limit beyond the queue's bound.
	SendBacklog(b []byte) sendResult
	// Written is how many frames have been, or are being, written to the
	// connection.
	Written() uint64
	// SetBatch turns batched writes on or off: frames queued together
	// are then written as one message, a JSON array of frames
	// (wire.SplitBatch), bounded by wire.BatchMaxBytes and
	// wire.BatchMaxFrames.
	SetBatch(on bool)
	// Close writes the frames already queued (bounded by the write
	// timeout), then a close frame with code and reason; the connection
	// ends once the client answers it (or shortly after). Idempotent; the
	// first call's code wins.
	Close(code int, reason string)
	// Abort closes at once, dropping queued frames: the client is too slow
	// to be waited for. The close frame is sent on a best-effort basis.
	Abort(code int, reason string)
	// Expire drops the queued frames, writes final (taking ownership),
	// then the close frame, and closes: the credentials ran out, so
	// nothing queued before may reach the client any more.
	Expire(final *[]byte, code int, reason string)
}

// sendResult is the outcome of transport.Send.
type sendResult uint8

const (
	sent        sendResult = iota
	queueFull              // the client is too slow
	sendClosing            // the transport is closing; the frame is dropped
)

// bufPool recycles frame buffers.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 512)
	return &b
}}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > 64<<10 {
		return // let big buffers go
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

// wsTransport is the transport of one WebSocket connection: a bounded queue
// drained by one writer goroutine (gorilla allows one concurrent writer).
// Writes of a burst of queued frames are coalesced into few syscalls by
// bconn. An idle connection holds no queue memory.
type wsTransport struct {
	ws    *websocket.Conn
	bconn *wsbatch.Conn
	log   *slog.Logger
	wt    time.Duration // write timeout
	ping  time.Duration

	qmu    sync.Mutex
	q      []qframe // frames waiting, oldest first
	queued uint64   // frames queued so far (numbers frames)
	// written counts the frames handed to the kernel, or being handed
	// (counted before the write, so that a client can never have read a
	// frame not yet counted); frames are written in the order queued.
	written  atomic.Uint64
	max      int
	backlog  int           // frames SendBacklog may queue beyond max
	nBacklog int           // backlog frames in q (guarded by qmu)
	wake     chan struct{} // capacity 1: the queue became non-empty
	spare    []qframe      // the writer's batch slice, reused

	mu       sync.Mutex
	closing  bool
	code     int
	reason   string
	final    *[]byte // Expire's last frame
	abort    atomic.Bool
	batch    atomic.Bool // write queued frames as batches (SetBatch)
	broken   bool        // a write failed: nothing more can be written (writer only)
	deadline time.Time   // the write deadline in force (writer only)
	// closeSent: the close frame was written; then the connection is left
	// open for [wsTransport.linger] (written by the writer, read once it
	// has returned).
	closeSent bool
	closeCh   chan struct{} // closed by Close / Abort
	done      chan struct{} // closed when the writer has returned
}

func newWSTransport(ws *websocket.Conn, bc *wsbatch.Conn, queue int, writeTimeout, ping time.Duration, log *slog.Logger) *wsTransport {
	return &wsTransport{
		ws: ws, bconn: bc, log: log, wt: writeTimeout, ping: ping,
		max:     queue,
		wake:    make(chan struct{}, 1),
		closeCh: make(chan struct{}),
		done:    make(chan struct{}),
	}
}

func (t *wsTransport) Send(buf *[]byte) sendResult {
	r, _ := t.SendNumbered(buf)
	return r
}

func (t *wsTransport) SendNumbered(buf *[]byte) (sendResult, uint64) {
	return t.enqueue(qframe{own: buf}, false)
}

func (t *wsTransport) SendShared(b []byte) sendResult {
	r, _ := t.enqueue(qframe{shared: b}, false)
	return r
}

// SendBacklog queues shared bytes as SendShared does, but up to backlog
// frames beyond the queue's bound: a live recovery's events, written
// before the client has anything else to read.
func (t *wsTransport) SendBacklog(b []byte) sendResult {
	r, _ := t.enqueue(qframe{shared: b}, true)
	return r
}

// qframe is one queued frame: a pooled buffer the transport owns, or
// shared bytes it only reads.
type qframe struct {
	own    *[]byte
	shared []byte
}

func (f qframe) bytes() []byte {
	if f.own != nil {
		return *f.own
	}
	return f.shared
}

func (f qframe) release() {
	if f.own != nil {
		putBuf(f.own)
	}
}

// enqueue queues f: within max frames not counting backlog frames, or,
// for a backlog frame, within max+backlog backlog frames.
func (t *wsTransport) enqueue(f qframe, backlog bool) (sendResult, uint64) {
	select {
	case <-t.closeCh:
		f.release()
		return sendClosing, 0
	default:
	}
	t.qmu.Lock()
	full := len(t.q)-t.nBacklog >= t.max
	if backlog {
		full = t.nBacklog >= t.max+t.backlog
	}
	if full {
		t.qmu.Unlock()
		f.release()
		return queueFull, 0
	}
	if backlog {
		t.nBacklog++
	}
	t.q = append(t.q, f)
	t.queued++
	n := t.queued
	t.qmu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
	return sent, n
}

func (t *wsTransport) Written() uint64 { return t.written.Load() }

func (t *wsTransport) SetBatch(on bool) { t.batch.Store(on) }

// take moves the queued frames into the writer's batch slice.
func (t *wsTransport) take() []qframe {
	t.qmu.Lock()
	defer t.qmu.Unlock()
	batch := t.q
	if len(batch) == 0 {
		if cap(batch) > 64 {
			t.q = nil // give back the memory of a past burst
		}
		return nil
	}
	t.q = t.spare[:0]
	t.spare = nil
	t.nBacklog = 0
	return batch
}

// recycle hands an emptied batch slice back for the next take.
func (t *wsTransport) recycle(batch []qframe) {
	clear(batch)
	if cap(batch) > 64 {
		return
	}
	t.qmu.Lock()
	t.spare = batch[:0]
	t.qmu.Unlock()
}

func (t *wsTransport) Close(code int, reason string) { t.close(code, reason, false) }

func (t *wsTransport) Abort(code int, reason string) { t.close(code, reason, true) }

func (t *wsTransport) Expire(final *[]byte, code int, reason string) {
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		putBuf(final)
		return
	}
	t.final = final
	t.mu.Unlock()
	// Stop after the frame being written, if any (cutting it would leave
	// no way to write the close frame), dropping the rest.
	t.abort.Store(true)
	t.close(code, reason, false)
}

func (t *wsTransport) close(code int, reason string, abort bool) {
	if abort && !t.abort.Swap(true) {
		// Unblock a write in progress; the writer then stops writing
		// frames and only tries the close frame.
		_ = t.bconn.Conn.SetWriteDeadline(time.Now())
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing {
		return
	}
	t.closing, t.code, t.reason = true, code, reason
	close(t.closeCh)
}

// run is the writer goroutine. It returns once the close frame is written
// (the connection is then closed by [wsTransport.linger]), or after closing
// the connection when it cannot be written to.
func (t *wsTransport) run() {
	defer close(t.done)
	defer func() {
		if !t.closeSent {
			_ = t.ws.NetConn().Close()
		}
	}()
	// Once the writer is gone, Send reports closing, not a full queue.
	defer t.close(wire.CloseNormal, "", false)
	ping := time.NewTicker(t.ping)
	defer ping.Stop()
	for {
		select {
		case <-t.wake:
			if !t.flush() {
				if t.broken {
					t.drop()
				} else {
					t.finish() // stopped by Abort or Expire between frames
				}
				return
			}
		case <-ping.C:
			if err := t.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(t.wt)); err != nil {
				t.log.Debug("ping failed", "err", err)
				t.drop()
				return
			}
		case <-t.closeCh:
			t.finish()
			return
		}
	}
}

// flush writes everything queued, in bursts coalesced by bconn, until the
// queue is empty.
func (t *wsTransport) flush() bool {
	yielded := false
	for {
		batch := t.take()
		if len(batch) == 0 {
			if yielded {
				return true
			}
			// Let the goroutines producing frames (bus deliveries, the
			// reader's answers) add theirs to this write.
			yielded = true
			runtime.Gosched()
			continue
		}
		ok := t.writeBatch(batch)
		t.recycle(batch)
		if !ok {
			return false
		}
	}
}

// writeBatch writes the frames of batch, returning their buffers to the pool.
func (t *wsTransport) writeBatch(batch []qframe) bool {
	defer func() {
		for _, f := range batch {
			f.release()
		}
	}()
	if t.abort.Load() {
		return false
	}
	// A deadline set less than half a timeout ago still leaves every write
	// at least half of it: resetting it for every batch (often one frame)
	// was a sixth of a live fan-out's CPU.
	if now := time.Now(); t.deadline.Sub(now) < t.wt/2 {
		t.deadline = now.Add(t.wt)
		_ = t.ws.SetWriteDeadline(t.deadline)
	}
	t.bconn.Hold()
	coalesce := t.batch.Load()
	for i := 0; i < len(batch); {
		n := 1
		if coalesce {
			n = batchLen(batch[i:])
		}
		// Counted before the bytes go out (bconn may pass a large
		// message on at once): once they may have reached the client,
		// they count as written.
		t.written.Add(uint64(n))
		err := wsbatch.WriteFrames(t.ws, batch[i:i+n], qframe.bytes)
		for j := i; j < i+n; j++ {
			batch[j].release()
			batch[j] = qframe{}
		}
		i += n
		if err != nil {
			_ = t.bconn.Release()
			t.broken = true
			t.log.Debug("write failed", "err", err)
			return false
		}
		if t.abort.Load() {
			// Frames buffered but not yet on the wire stay unsent.
			t.bconn.Discard()
			return false
		}
		if t.bconn.Buffered() >= wsbatch.FlushBytes {
			if err := t.bconn.Release(); err != nil {
				t.broken = true
				return false
			}
			t.bconn.Hold()
		}
	}
	if err := t.bconn.Release(); err != nil {
		t.broken = true
		t.log.Debug("flush failed", "err", err)
		return false
	}
	return !t.abort.Load()
}

// batchLen is how many of the frames q starts with go in one message: as
// many as fit in wire.BatchMaxBytes and wire.BatchMaxFrames, at least one.
func batchLen(q []qframe) int {
	size := len(q[0].bytes()) + 2
	n := 1
	for n < len(q) && n < wire.BatchMaxFrames {
		size += len(q[n].bytes()) + 1
		if size > wire.BatchMaxBytes {
			break
		}
		n++
	}
	return n
}

// finish writes the queued frames (unless aborting), the close frame, and
// closes.
func (t *wsTransport) finish() {
	t.mu.Lock()
	code, reason, final := t.code, t.reason, t.final
	t.final = nil
	t.mu.Unlock()
	if !t.abort.Load() {
		t.flush()
	}
	t.drop()
	deadline := time.Now().Add(min(t.wt, time.Second))
	if final != nil {
		_ = t.ws.SetWriteDeadline(deadline)
		_ = t.ws.WriteMessage(websocket.TextMessage, *final)
		putBuf(final)
	}
	err := t.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, truncateString(reason, 120)), deadline)
	if err == nil {
		t.closeSent = true
		// A reader still waiting for a frame stops by the end of the
		// linger at the latest.
		_ = t.ws.SetReadDeadline(time.Now().Add(t.lingerTime()))
	}
}

// lingerTime bounds how long a connection whose close frame was written
// waits for the client's while the client sends nothing.
func (t *wsTransport) lingerTime() time.Duration { return min(t.wt, time.Second) }

// linger ends the connection once the writer has returned and the session's
// reader has stopped. After the close frame it reads on, discarding, until
// the client answers with its own close frame (having sent all it had
// sent before), the connection ends, or the client sends nothing for
// lingerTime; unless peerDone says the reader already saw the end. A
// client that keeps sending is read for up to the write timeout: it is
// alive, and its answer comes behind what it sent, which a loaded machine
// may take more than lingerTime to read. Closing with frames unread
// would make the kernel reset the connection, and a client may then lose
// the frames still on their way to it (ERR, the close frame): it would see
// 1006 and not know why it was closed.
func (t *wsTransport) linger(peerDone bool) {
	<-t.done
	defer t.ws.NetConn().Close()
	if !t.closeSent || peerDone {
		return
	}
	// The close frame is written: nothing more is (no answer to the
	// client's close or pings).
	t.ws.SetCloseHandler(func(int, string) error { return nil })
	t.ws.SetPingHandler(func(string) error { return nil })
	t.ws.SetPongHandler(func(string) error { return nil })
	end := time.Now().Add(t.wt)
	for {
		deadline := time.Now().Add(t.lingerTime())
		if deadline.After(end) {
			deadline = end
		}
		_ = t.ws.SetReadDeadline(deadline)
		if _, _, err := t.ws.NextReader(); err != nil {
			return
		}
	}
}

// drop returns the queued buffers to the pool.
func (t *wsTransport) drop() {
	for _, f := range t.take() {
		f.release()
	}
}

// truncateString cuts s to at most n bytes.
func truncateString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
