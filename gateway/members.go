package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/eventhub/eventhub/facade"
)

// memberKey names a group on one topic.
type memberKey struct{ topic, group string }

// member is the gateway's one bus member of a group on one topic, shared
// by every session subscription that reads the topic as that group (the
// way a broker subscription per channel is shared by a node's clients).
// The bus delivers to it one event at a time, in stream order; dispatch
// hands each to an attached subscription with room in its window, round
// robin, and waits while none has room: a slow group pauses its pull
// instead of dropping events.
type member struct {
	shared
	gw   *Gateway
	key  memberKey
	bsub facade.Subscription

	mu    sync.Mutex
	subs  []*subscription
	cur   int           // the subscription taking the current burst
	burst int           // events left in the current burst
	space chan struct{} // a lease ended or the attached set changed
}

// dispatchBurst is how many events in a row one subscription gets before
// the next one's turn: consecutive EVENT frames to one connection go out in
// one write, where strict round robin would cost a write per event.
const dispatchBurst = 64

// join takes a reference to the member of (topic, sub's group), starting
// the member with opts when it is the first; [member.attach] then lets it
// deliver to sub.
func (g *Gateway) join(ctx context.Context, sub *subscription, topic string, opts facade.SubscribeOptions) (*member, error) {
	k := memberKey{topic, sub.key.group}
	m, create, err := g.members.join(ctx, k, func() *member {
		return &member{gw: g, key: k, space: make(chan struct{}, 1)}
	}, func(m *member) (err error) {
		bopts := opts
		bopts.Topics = nil
		// The member serves every session that joins it: a creator whose
		// request ends meanwhile must not fail the others waiting.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.RequestTimeout)
		defer cancel()
		m.bsub, err = g.bus.Subscribe(cctx, topic, k.group, m.dispatch, bopts)
		return err
	})
	if err != nil {
		return nil, err
	}
	// The member was started with the options of its first subscription:
	// a later one that asks for another retry policy or order than the
	// group's is refused, as a member of its own would be.
	if gc, ok := m.bsub.(groupChecker); ok && !create {
		if err := gc.CheckGroupOptions(opts); err != nil {
			g.leave(m, sub)
			return nil, err
		}
	}
	return m, nil
}

// groupChecker is a bus subscription that knows the options its group
// holds for all members (retry policy, order).
type groupChecker interface {
	CheckGroupOptions(facade.SubscribeOptions) error
}

// attach makes sub a destination of m's events, unless it stopped
// meanwhile (it then left m already, or leaves after this).
func (m *member) attach(sub *subscription) {
	m.mu.Lock()
	if !sub.closed.Load() {
		m.subs = append(m.subs, sub)
	}
	m.mu.Unlock()
	m.wake()
}

// leave detaches sub; the last one to leave stops the member.
func (g *Gateway) leave(m *member, sub *subscription) {
	m.mu.Lock()
	for i, x := range m.subs {
		if x == sub {
			m.subs = append(m.subs[:i], m.subs[i+1:]...)
			break
		}
	}
	m.mu.Unlock()
	m.wake()
	if !g.members.unref(m.key, m) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.RequestTimeout)
	defer cancel()
	if err := m.bsub.Stop(ctx); err != nil {
		g.log.Warn("stop group member", "topic", m.key.topic, "group", m.key.group, "err", err)
	}
}

// wake tells a waiting dispatch to look again.
func (m *member) wake() {
	select {
	case m.space <- struct{}{}:
	default:
	}
}

// dispatch is the member's handler: it leases d to one attached
// subscription with room, waiting while there is none. When the member
// stops first, d goes back to the group without spending an attempt.
//
// While it waits, d's deadline at the store is kept ahead (extended by the
// member's ack timeout whenever half of it is left), so that the event a
// session finally gets is still the group's to hand out; if it cannot be
// kept (the delivery ended meanwhile), the store redelivers it and d is
// dropped here.
func (m *member) dispatch(ctx context.Context, d facade.Delivery) error {
	// The common case: a subscription has room.
	if sub := m.pick(d.Attempt() > 1); sub != nil {
		sub.s.deliver(sub, d)
		return nil
	}
	var keep *time.Timer
	defer func() {
		if keep != nil {
			keep.Stop()
		}
	}()
	lease := time.Until(d.Deadline())
	for {
		if sub := m.pick(d.Attempt() > 1); sub != nil {
			sub.s.deliver(sub, d)
			return nil
		}
		due := time.Until(d.Deadline()) - lease/2
		if keep == nil {
			keep = time.NewTimer(due)
		} else {
			keep.Reset(due)
		}
		select {
		case <-m.space:
		case <-keep.C:
			if err := d.Extend(ctx, lease); err != nil {
				m.gw.log.Debug("waiting delivery ended", "topic", m.key.topic, "group", m.key.group, "id", d.Event().ID, "err", err)
				return nil
			}
		case <-ctx.Done():
			m.gw.giveBack(d, false, "no subscriber")
			return nil
		}
	}
}

// pick reserves a window slot on an attached subscription: the current
// one while its burst lasts and it has room, else the next that has room,
// round robin. A redelivery moves on to the next subscription, so that
// an event its first subscriber let expire gets to another one.
func (m *member) pick(redelivery bool) *subscription {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.subs)
	if n == 0 {
		return nil
	}
	if m.cur >= n {
		m.cur, m.burst = 0, 0
	}
	if m.burst > 0 && !redelivery && m.subs[m.cur].reserve() {
		m.burst--
		return m.subs[m.cur]
	}
	for i := 1; i <= n; i++ {
		j := (m.cur + i) % n
		if m.subs[j].reserve() {
			m.cur, m.burst = j, dispatchBurst-1
			return m.subs[j]
		}
	}
	return nil
}

// giveBack hands a delivery back to its group: released without spending
// an attempt when its client never saw it (and the bus can), else nacked,
// redelivered with attempt+1 after the bus's retry backoff.
func (g *Gateway) giveBack(d facade.Delivery, seen bool, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.RequestTimeout)
	defer cancel()
	if r, ok := d.(facade.Releaser); ok && !seen {
		if err := r.Release(ctx); err == nil {
			return
		}
	}
	if err := d.Nack(ctx, reason); err != nil {
		e := d.Event()
		g.log.Debug("hand back", "topic", e.Topic, "group", d.Group(), "id", e.ID, "err", err)
	}
}

// leaseFor makes d's deadline the end of a lease of length lease from now
// (give or take a tenth of it): a subscription may ask for a longer or a
// shorter lease than the member's, and a delivery may have waited for
// room.
func leaseFor(ctx context.Context, d facade.Delivery, lease time.Duration) error {
	if left := time.Until(d.Deadline()); left >= lease-lease/10 && left <= lease {
		return nil
	}
	return d.Extend(ctx, lease)
}
