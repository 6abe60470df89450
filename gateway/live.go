package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/eventjson"
	"github.com/eventhub/eventhub/wire"
)

// Live subscriptions: a SUBSCRIBE without a group follows a topic. The
// gateway reads each topic once (one [facade.LiveReader.Follow] per topic
// while anyone follows it) and fans every event out in memory, encoded
// once. A subscription may first recover what it missed since a stream
// position, or start from a snapshot of a keyed topic; events published
// meanwhile wait in its pending list, so nothing is skipped or sent twice.

// liveSink is where a live subscription's events go: a WebSocket session
// or an SSE stream.
type liveSink interface {
	// sendLive queues one event; false when the sink cannot take it (too
	// slow, or gone), which ends the subscription.
	sendLive(ev *liveEvent) bool
	// sendRecovered queues one event of a recovery or a snapshot: sent
	// before the client reads anything, so it may queue up to
	// LiveRecoveryLimit events beyond the live bound; false as sendLive.
	sendRecovered(ev *liveEvent) bool
	// sendReady tells the client that the subscription is live: after the
	// recovered or snapshot events, before the live ones.
	sendReady(r liveReady)
}

// liveReady is what a live SUBSCRIBE's OK says.
type liveReady struct {
	// Recovery: the subscription recovered (since) or took a snapshot.
	Recovery bool
	// Recovered: the recovery (or snapshot) was complete.
	Recovered bool
	// Seq is the position the live events continue after.
	Seq uint64
	// First is the oldest position the stream still holds, when the
	// recovery was not complete.
	First uint64
}

// liveEvent is one event as it is fanned out, encoded at most once per
// form, shared by every subscriber.
type liveEvent struct {
	e       *facade.EventRecord
	wsOnce  sync.Once
	ws      []byte
	sseOnce sync.Once
	sse     []byte
}

// wsFrame is the event's EVENT frame: {"op":"EVENT","topic":…,"event":{…}}.
func (ev *liveEvent) wsFrame() []byte {
	ev.wsOnce.Do(func() { ev.ws = wire.AppendLiveEvent(nil, ev.e) })
	return ev.ws
}

// sseFrame is the event as a Server-Sent Event: its position as the id,
// the event record as the data, with a "trace" member when the event
// carries trace context.
func (ev *liveEvent) sseFrame() []byte {
	ev.sseOnce.Do(func() {
		b := append([]byte("id: "), strconv.FormatUint(ev.e.Seq, 10)...)
		b = append(b, "\nevent: event\ndata: "...)
		b = eventjson.Append(b, ev.e)
		if tc := ev.e.Trace; tc != nil {
			b = append(wire.AppendTrace(append(b[:len(b)-1], ','), tc), '}')
		}
		ev.sse = append(b, "\n\n"...)
	})
	return ev.sse
}

// liveTopic is the gateway's one follower of a topic, shared by every live
// subscription to it. Its subscriptions are split into shards of up to
// liveShardSize, each fanned out by its own goroutine: the follower only
// hands each event to every shard, so a slow step (a connection's queue, a
// scheduler short of CPU) holds back at most its shard, and the shards of a
// large topic fan out on every core.
type liveTopic struct {
	shared
	gw    *Gateway
	topic string
	fsub  facade.Subscription
	stop  chan struct{} // closed when the follower stops: the shards end
	wg    sync.WaitGroup

	mu     sync.Mutex
	shards []*liveShard // only grows, until the topic stops
	n      int          // live subscriptions, all shards
	last   uint64       // position of the last event fanned out
}

// Shards: a topic opens another shard once every shard has liveShardSize
// subscriptions, up to liveShards.
const (
	liveShardSize = 32
	liveShards    = 64
)

// liveShard is a part of a topic's subscriptions with its own fan-out
// goroutine and queue of events.
type liveShard struct {
	lt   *liveTopic
	n    int           // subscriptions (guarded by lt.mu)
	wake chan struct{} // capacity 1: events were queued
	room chan struct{} // capacity 1: the queue was taken

	qmu   sync.Mutex
	q     []*liveEvent // bounded by Config.OutboundQueue
	spare []*liveEvent

	// subs is replaced, never changed, under lt.mu: a fan-out pass reads
	// it without a lock, so that adding or removing a subscription never
	// waits for a pass (which a stalled connection may hold).
	subs atomic.Pointer[[]*liveSub]
}

// liveSub is one live subscription.
type liveSub struct {
	lt      *liveTopic
	shard   *liveShard
	sink    liveSink
	release func() // the subscription quota's; nil: none

	keys *string // a watch's key prefix; nil: every event

	mu       sync.Mutex
	catching bool         // recovering: live events wait in pending
	pending  []*liveEvent // bounded by Config.LivePending
	last     uint64       // position of the last event sent
	dead     bool
}

// onEvent hands one followed event to every shard. It runs on the
// follower's goroutine, one event at a time. A shard whose queue is full
// (its goroutine a connection's queue behind) holds the follower until it
// takes its queue: the events wait in the stream meanwhile.
func (lt *liveTopic) onEvent(e *facade.EventRecord) {
	ev := &liveEvent{e: e}
	lt.mu.Lock()
	lt.last = e.Seq
	shards := lt.shards
	lt.mu.Unlock()
	// A subscription added from here on starts after e (its last is
	// e.Seq): a shard offering e to it skips it.
	for _, sh := range shards {
		sh.push(ev)
	}
}

// push queues ev for the shard's fan-out.
func (sh *liveShard) push(ev *liveEvent) {
	sh.qmu.Lock()
	for len(sh.q) >= sh.lt.gw.cfg.OutboundQueue {
		sh.qmu.Unlock()
		select {
		case <-sh.room:
		case <-sh.lt.stop:
			return
		}
		sh.qmu.Lock()
	}
	sh.q = append(sh.q, ev)
	sh.qmu.Unlock()
	select {
	case sh.wake <- struct{}{}:
	default:
	}
}

// run is the shard's fan-out goroutine: it offers the queued events, in
// order, to each of its subscriptions, until the topic stops.
func (sh *liveShard) run() {
	defer sh.lt.wg.Done()
	for {
		select {
		case <-sh.wake:
		case <-sh.lt.stop:
			return
		}
		for {
			sh.qmu.Lock()
			evs := sh.q
			sh.q, sh.spare = sh.spare[:0], nil
			sh.qmu.Unlock()
			if len(evs) == 0 {
				break
			}
			select {
			case sh.room <- struct{}{}:
			default:
			}
			for _, ev := range evs {
				// Loaded after ev was queued: a subscription added
				// before ev is in it.
				subs := *sh.subs.Load()
				sh.lt.gw.liveFanout.Add(uint64(len(subs)))
				for _, sub := range subs {
					sub.offer(ev)
				}
			}
			clear(evs)
			sh.qmu.Lock()
			sh.spare = evs[:0]
			sh.qmu.Unlock()
		}
	}
}

// add puts sub in the least loaded shard, opening one when every shard is
// full (up to liveShards). The caller holds lt.mu.
func (lt *liveTopic) add(sub *liveSub) {
	var sh *liveShard
	for _, s := range lt.shards {
		if sh == nil || s.n < sh.n {
			sh = s
		}
	}
	if sh == nil || sh.n >= liveShardSize && len(lt.shards) < liveShards {
		sh = &liveShard{lt: lt, wake: make(chan struct{}, 1), room: make(chan struct{}, 1)}
		sh.subs.Store(new([]*liveSub))
		// A copy: onEvent ranges over the slice it read without lt.mu.
		lt.shards = append(lt.shards[:len(lt.shards):len(lt.shards)], sh)
		lt.wg.Add(1)
		go sh.run()
	}
	sh.n++
	lt.n++
	sub.shard = sh
	subs := append(slices.Clip(*sh.subs.Load()), sub)
	sh.subs.Store(&subs)
}

// offer sends ev, or keeps it while the subscription recovers.
func (sub *liveSub) offer(ev *liveEvent) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	switch {
	case sub.dead, !sub.watches(ev.e):
	case sub.catching:
		if len(sub.pending) >= sub.lt.gw.cfg.LivePending {
			sub.dead = true // the sink is told by the recovery
			return
		}
		sub.pending = append(sub.pending, ev)
	case ev.e.Seq > sub.last:
		sub.last = ev.e.Seq
		if !sub.sink.sendLive(ev) {
			sub.dead = true
			sub.lt.gw.liveDrops.Add(1)
		}
	}
}

// follow starts a live subscription of sink to topic: recovering from
// opts.Since or starting from a snapshot when asked, then live. It returns
// once the subscription is live (its OK sent).
func (g *Gateway) follow(ctx context.Context, topic string, opts wire.LiveOptions, sink liveSink) (*liveSub, error) {
	lr, ok := g.bus.(facade.LiveReader)
	if !ok {
		return nil, wire.ErrUnsupported
	}
	lt, err := g.liveTopicOf(ctx, lr, topic)
	if err != nil {
		return nil, err
	}
	sub := &liveSub{lt: lt, sink: sink, catching: opts.Since != nil || opts.Snapshot, keys: opts.KeyPrefix}
	lt.mu.Lock()
	lt.add(sub)
	if !sub.catching {
		// The position its live events continue after, as far as this
		// gateway has fanned out (0 before the topic's first event here):
		// a client that reconnects before its first event recovers from it.
		sub.mu.Lock()
		sub.last = lt.last
		sink.sendReady(liveReady{Recovered: true, Seq: lt.last})
		sub.mu.Unlock()
		lt.mu.Unlock()
		return sub, nil
	}
	lt.mu.Unlock()
	ready, err := g.recover(ctx, lr, sub, opts)
	if err != nil {
		g.unfollow(sub)
		return nil, err
	}
	// Send what arrived meanwhile (after what was recovered), then go live.
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.dead {
		go g.unfollow(sub)
		return nil, fmt.Errorf("%w: more than %d events were published while the subscription recovered", wire.ErrSlowClient, g.cfg.LivePending)
	}
	sink.sendReady(ready)
	for _, ev := range sub.pending {
		if ev.e.Seq > sub.last {
			sub.last = ev.e.Seq
			if !sink.sendLive(ev) {
				sub.dead = true
				break
			}
		}
	}
	sub.pending, sub.catching = nil, false
	return sub, nil
}

// recover sends sub what its topic holds after opts.Since (or a snapshot)
// and says how complete that was.
func (g *Gateway) recover(ctx context.Context, lr facade.LiveReader, sub *liveSub, opts wire.LiveOptions) (liveReady, error) {
	topic := sub.lt.topic
	var after uint64
	ready := liveReady{Recovery: true, Recovered: true}
	if opts.Snapshot {
		ks, ok := g.bus.(facade.KeyScanner)
		if !ok {
			return ready, wire.ErrUnsupported
		}
		upTo, err := ks.Latest(ctx, topic, func(e *facade.EventRecord) error {
			return sub.sendRecovered(e)
		})
		if err != nil {
			return ready, err
		}
		after = upTo
	} else {
		var err error
		if after, err = g.positionOf(ctx, topic, opts.Since); err != nil {
			return ready, err
		}
	}
	// The client has everything up to after: a lagging follower's events
	// at or before it, waiting in pending, must not be sent again.
	sub.mu.Lock()
	sub.last = max(sub.last, after)
	sub.mu.Unlock()
	res, err := lr.ReadAfter(ctx, topic, after, g.cfg.LiveRecoveryLimit, sub.sendRecovered)
	if err != nil {
		return ready, err
	}
	if !opts.Snapshot && after > res.Last {
		// The client's position is past the stream's end: not this
		// stream's (recreated, reset): start over from its end.
		sub.mu.Lock()
		sub.last = res.Last
		sub.mu.Unlock()
		after = res.Last
		ready.Recovered, ready.First = false, max(res.First, 1)
	}
	ready.Seq = max(after, res.Last)
	sub.mu.Lock()
	ready.Seq = max(ready.Seq, sub.last)
	sub.mu.Unlock()
	if res.More || !res.Complete && !opts.Snapshot {
		// (After a snapshot nothing is missing: an event removed after
		// its position was replaced by a newer one of its key, which is
		// read.)
		// The stream no longer holds all of it, or it is more than a
		// recovery may send: the client has to start over from a
		// snapshot or its own store.
		ready.Recovered, ready.First = false, res.First
	}
	if res.More {
		// Go live from here on: what was not sent is skipped.
		sub.mu.Lock()
		sub.last = max(sub.last, res.Last)
		sub.mu.Unlock()
	}
	return ready, nil
}

// sendRecovered sends one recovered event in order.
func (sub *liveSub) sendRecovered(e *facade.EventRecord) error {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.dead {
		return wire.ErrSlowClient
	}
	if e.Seq <= sub.last || !sub.watches(e) {
		return nil
	}
	sub.last = e.Seq
	if !sub.sink.sendRecovered(&liveEvent{e: e}) {
		sub.dead = true
		return wire.ErrSlowClient
	}
	return nil
}

// watches reports whether e is for sub: a watch takes the keyed events of
// its prefix.
func (sub *liveSub) watches(e *facade.EventRecord) bool {
	return sub.keys == nil || e.Key != "" && strings.HasPrefix(e.Key, *sub.keys)
}

// positionOf resolves a SUBSCRIBE's since.
func (g *Gateway) positionOf(ctx context.Context, topic string, p *wire.LivePosition) (uint64, error) {
	if p.ID == "" {
		return p.Seq, nil
	}
	r, ok := g.bus.(interface {
		SeqOfID(ctx context.Context, topic, id string) (uint64, error)
	})
	if !ok {
		return 0, fmt.Errorf("%w: since by id is not supported by this bus; use seq", wire.ErrUnsupported)
	}
	return r.SeqOfID(ctx, topic, p.ID)
}

// liveTopicOf returns the topic's follower, starting it for the first
// subscriber.
func (g *Gateway) liveTopicOf(ctx context.Context, lr facade.LiveReader, topic string) (*liveTopic, error) {
	lt, _, err := g.live.join(ctx, topic, func() *liveTopic {
		return &liveTopic{gw: g, topic: topic, stop: make(chan struct{})}
	}, func(lt *liveTopic) error {
		// Resolve "now" here so that lt.last (the OK's seq) is a real
		// position before the first event is fanned out.
		res, err := lr.ReadAfter(ctx, topic, math.MaxUint64, 1, func(*facade.EventRecord) error { return nil })
		if err != nil {
			return err
		}
		lt.last = res.Last
		lt.fsub, err = lr.Follow(ctx, topic, res.Last, lt.onEvent)
		return err
	})
	return lt, err
}

// unfollow ends sub; the last subscriber of a topic stops its follower.
func (g *Gateway) unfollow(sub *liveSub) {
	lt := sub.lt
	lt.mu.Lock()
	if sh := sub.shard; sh != nil {
		sub.shard = nil
		sh.n--
		lt.n--
		subs := slices.DeleteFunc(slices.Clone(*sh.subs.Load()), func(s *liveSub) bool { return s == sub })
		sh.subs.Store(&subs)
	}
	lt.mu.Unlock()
	// A pass that read the shard's subscriptions before may still offer
	// to sub: once dead (below, under sub.mu), nothing more is sent.
	sub.mu.Lock()
	sub.dead, sub.pending = true, nil
	release := sub.release
	sub.release = nil
	sub.mu.Unlock()
	if release != nil {
		release()
	}
	if !g.live.unref(lt.topic, lt) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.RequestTimeout)
	defer cancel()
	if err := lt.fsub.Stop(ctx); err != nil && !errors.Is(err, context.Canceled) {
		g.log.Warn("stop following", "topic", lt.topic, "err", err)
	}
	close(lt.stop)
	lt.wg.Wait()
}
