package client

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/wire"
)

var (
	_ facade.Follower   = (*Client)(nil)
	_ facade.KeyWatcher = (*Client)(nil)
)

// follow is one live subscription of the client; it survives reconnects.
type follow struct {
	c     *Client
	topic string
	fn    func(*facade.EventRecord)
	last  atomic.Uint64 // position of the last event handed to fn
	// keys is a watch's key prefix (nil: a follow); snapshot: its first
	// SUBSCRIBE asks for the current values.
	keys     *string
	snapshot bool
	// established: its first SUBSCRIBE was answered; until then a
	// reconnect leaves it to Follow, which sends it on the new connection.
	established atomic.Bool

	done  chan struct{}
	ended sync.Once
	err   error
}

var _ facade.Subscription = (*follow)(nil)

// frame is the SUBSCRIBE that (re)starts the subscription: after the last
// event it saw, or after `after` the first time.
func (f *follow) frame(after uint64, first bool) *wire.Frame {
	fr := &wire.Frame{Op: wire.OpSubscribe, Topic: f.topic}
	o := wire.LiveOptions{KeyPrefix: f.keys}
	pos := f.last.Load()
	if first {
		pos = after
	}
	switch {
	case first && f.snapshot:
		o.Snapshot = true
	case !first || after != facade.AfterNow:
		o.Since = &wire.LivePosition{Seq: pos}
	}
	if o != (wire.LiveOptions{}) {
		fr.Opts, _ = json.Marshal(o)
	}
	return fr
}

// Follow implements [facade.Follower] with a live SUBSCRIBE (no group): fn
// gets every event of topic stored after position after ([facade.AfterNow]:
// from now on), in order, on the connection's reader goroutine (so fn
// should return quickly). When the connection drops, the client subscribes
// again with since = the last position fn saw, and the gateway sends what
// was missed first; when the stream no longer holds all of it,
// Config.OnLiveGap is called.
func (c *Client) Follow(ctx context.Context, topic string, after uint64, fn func(*facade.EventRecord)) (facade.Subscription, error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: nil handler", facade.ErrInvalidOption)
	}
	return c.follow(ctx, &follow{c: c, topic: topic, fn: fn, done: make(chan struct{})}, after, nil)
}

// Watch implements [facade.KeyWatcher] with a live SUBSCRIBE with
// key_prefix (and snapshot, or since = opts.After): the gateway sends the
// current values, then the OK, on which fn gets nil, then the changes. fn
// runs on the connection's reader goroutine, as for [Client.Follow]; after
// a reconnect the watch resumes after the last position fn saw. A
// connection has one live subscription per topic: a watch and a Follow of
// one topic need two clients.
func (c *Client) Watch(ctx context.Context, topic string, opts facade.WatchOptions, fn func(*facade.EventRecord)) (facade.Subscription, error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: nil handler", facade.ErrInvalidOption)
	}
	if opts.After != nil && opts.UpdatesOnly {
		return nil, fmt.Errorf("%w: After and UpdatesOnly exclude each other", facade.ErrInvalidOption)
	}
	if err := facade.ValidateKey(opts.KeyPrefix); err != nil {
		return nil, fmt.Errorf("key prefix: %w", err)
	}
	f := &follow{c: c, topic: topic, fn: fn, done: make(chan struct{}),
		keys: &opts.KeyPrefix, snapshot: opts.After == nil && !opts.UpdatesOnly}
	after := facade.AfterNow
	if opts.After != nil {
		after = *opts.After
	}
	return c.follow(ctx, f, after, func() { fn(nil) })
}

// follow starts f after position after; onOK runs on the reader goroutine
// when its first SUBSCRIBE is answered.
func (c *Client) follow(ctx context.Context, f *follow, after uint64, onOK func()) (facade.Subscription, error) {
	topic := f.topic
	if err := facade.ValidateTopic(topic); err != nil {
		return nil, err
	}
	if after != facade.AfterNow {
		f.last.Store(after)
	}
	c.mu.Lock()
	if c.fatal != nil {
		err := c.fatal
		c.mu.Unlock()
		return nil, err
	}
	if c.lives[topic] != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: already following %s", wire.ErrAlreadySubscribed, topic)
	}
	c.lives[topic] = f
	c.mu.Unlock()
	r, err := c.callThen(ctx, f.frame(after, true), onOK)
	if err != nil {
		c.mu.Lock()
		if c.lives[topic] == f {
			delete(c.lives, topic)
		}
		c.mu.Unlock()
		return nil, err
	}
	f.checkRecovered(r)
	f.established.Store(true)
	return f, nil
}

// checkRecovered reports an incomplete recovery.
func (f *follow) checkRecovered(r *wire.Frame) {
	if r.Recovered != nil && !*r.Recovered {
		f.c.log.Warn("live subscription resumed with a gap: the stream no longer holds every event after the last one seen",
			"topic", f.topic, "last", f.last.Load(), "first", r.First)
		if cb := f.c.cfg.OnLiveGap; cb != nil {
			cb(f.topic, f.last.Load(), r.First)
		}
		// Live events continue after the OK's seq, which may be below the
		// last position seen (a stream recreated since): start over there.
		f.last.Store(r.Seq)
		return
	}
	for { // the OK's seq is where live events continue: a position to resume from
		cur := f.last.Load()
		if r.Seq <= cur || f.last.CompareAndSwap(cur, r.Seq) {
			break
		}
	}
}

// deliver hands one live EVENT to fn, in order, once.
func (f *follow) deliver(e *facade.EventRecord) {
	if e.Seq != 0 && e.Seq <= f.last.Load() {
		return
	}
	f.last.Store(e.Seq)
	f.fn(e)
}

// Stop implements [facade.Subscription] with UNSUBSCRIBE.
func (f *follow) Stop(ctx context.Context) error {
	c := f.c
	c.mu.Lock()
	mine := c.lives[f.topic] == f
	if mine {
		delete(c.lives, f.topic)
	}
	c.mu.Unlock()
	defer f.end(nil)
	if !mine {
		return nil
	}
	_, err := c.call(ctx, &wire.Frame{Op: wire.OpUnsubscribe, Topic: f.topic})
	if err != nil && !isGone(err) {
		return err
	}
	return nil
}

// Drain implements [facade.Subscription]: nothing to settle, so it is Stop.
func (f *follow) Drain(ctx context.Context) error { return f.Stop(ctx) }

// Done implements [facade.Subscription].
func (f *follow) Done() <-chan struct{} { return f.done }

// Err implements [facade.Subscription].
func (f *follow) Err() error {
	select {
	case <-f.done:
		return f.err
	default:
		return nil
	}
}

func (f *follow) end(cause error) {
	f.ended.Do(func() {
		f.err = cause
		close(f.done)
	})
}
