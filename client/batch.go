package client

import (
	"net"
	"sync"
)

// A copy of the gateway's write coalescing (gateway/transport.go): while the
// writer goroutine writes a burst of queued frames they are buffered and
// written with one syscall; control frames written at other times pass
// through.

// batchFlushBytes is how much a burst buffers before it is written.
const batchFlushBytes = 64 << 10

// batchConn is the net.Conn under a client WebSocket. Between hold and
// release (the writer goroutine writing a burst of frames) writes are
// buffered and then written with one syscall; at any other time (the
// handshake, control frames from the reader goroutine) they pass through.
// Gorilla serialises its writes, so frames never interleave.
type batchConn struct {
	net.Conn
	mu      sync.Mutex
	holding bool
	buf     *[]byte // from batchPool while holding
}

var batchPool = sync.Pool{New: func() any {
	b := make([]byte, 0, batchFlushBytes+4096)
	return &b
}}

func (c *batchConn) Write(p []byte) (int, error) {
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

func (c *batchConn) hold() {
	c.mu.Lock()
	c.holding = true
	if c.buf == nil {
		c.buf = batchPool.Get().(*[]byte)
	}
	c.mu.Unlock()
}

func (c *batchConn) buffered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf == nil {
		return 0
	}
	return len(*c.buf)
}

// release writes what was buffered and returns the buffer to the pool, so
// an idle connection holds none.
func (c *batchConn) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding = false
	err := c.flushLocked()
	if c.buf != nil {
		*c.buf = (*c.buf)[:0]
		batchPool.Put(c.buf)
		c.buf = nil
	}
	return err
}

func (c *batchConn) flushLocked() error {
	if c.buf == nil || len(*c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(*c.buf)
	*c.buf = (*c.buf)[:0]
	return err
}
