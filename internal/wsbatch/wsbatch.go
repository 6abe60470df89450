// Package wsbatch coalesces the writes of a WebSocket connection: while its
// writer goroutine writes a burst of queued frames they are buffered and
// written with one syscall. The gateway and the Go client use it on their
// sides of the same protocol.
package wsbatch

import (
	"net"
	"sync"

	"github.com/gorilla/websocket"
)

// FlushBytes is how much a burst buffers before the writer should Release.
const FlushBytes = 64 << 10

// Conn wraps the net.Conn under a WebSocket. Between Hold and Release
// (the writer goroutine writing a burst of frames) writes are
// buffered and then written with one syscall; at any other time (the
// handshake, control frames from the reader goroutine) they pass through.
// Gorilla serialises its writes, so frames never interleave.
type Conn struct {
	net.Conn
	mu      sync.Mutex
	holding bool
	buf     *[]byte // from pool while holding
}

var pool = sync.Pool{New: func() any {
	b := make([]byte, 0, FlushBytes+4096)
	return &b
}}

// Write buffers p while held, else writes it through.
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holding && len(*c.buf)+len(p) <= cap(*c.buf) {
		*c.buf = append(*c.buf, p...)
		return len(p), nil
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// Hold starts buffering writes.
func (c *Conn) Hold() {
	c.mu.Lock()
	c.holding = true
	if c.buf == nil {
		c.buf = pool.Get().(*[]byte)
	}
	c.mu.Unlock()
}

// Buffered is how many bytes wait to be written.
func (c *Conn) Buffered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf == nil {
		return 0
	}
	return len(*c.buf)
}

// release writes what was buffered and returns the buffer to the pool, so
// an idle connection holds none.
func (c *Conn) Release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding = false
	err := c.flushLocked()
	if c.buf != nil {
		*c.buf = (*c.buf)[:0]
		pool.Put(c.buf)
		c.buf = nil
	}
	return err
}

// Discard drops what was buffered (whole frames: the writer calls it
// between frames) and stops buffering: the frames are not to be sent after
// all.
func (c *Conn) Discard() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding = false
	if c.buf != nil {
		*c.buf = (*c.buf)[:0]
		pool.Put(c.buf)
		c.buf = nil
	}
}

func (c *Conn) flushLocked() error {
	if c.buf == nil || len(*c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(*c.buf)
	*c.buf = (*c.buf)[:0]
	return err
}

// WriteFrames writes frames (the bytes of each element, by frame) as one
// text message: the frame itself when there is one, else the batch of
// them, [frame,frame,…] (wire.SplitBatch), without copying them.
func WriteFrames[T any](ws *websocket.Conn, frames []T, frame func(T) []byte) error {
	if len(frames) == 1 {
		return ws.WriteMessage(websocket.TextMessage, frame(frames[0]))
	}
	w, err := ws.NextWriter(websocket.TextMessage)
	if err != nil {
		return err
	}
	sep := []byte{'['}
	for _, f := range frames {
		if _, err := w.Write(sep); err != nil {
			return err
		}
		sep[0] = ','
		if _, err := w.Write(frame(f)); err != nil {
			return err
		}
	}
	if _, err := w.Write([]byte{']'}); err != nil {
		return err
	}
	return w.Close()
}
