package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/wire"
)

// delivery is one EVENT handed to a handler: the [facade.Delivery] handle
// whose Ack, Nack and Extend send ACK, NACK and MODACK for its lease on the
// connection it arrived on.
type delivery struct {
	s       *subscription
	cn      *conn
	ev      facade.EventRecord
	attempt int

	mu       sync.Mutex
	done     bool
	deadline time.Time
}

var _ facade.Delivery = (*delivery)(nil)

func (d *delivery) Event() *facade.EventRecord { return &d.ev }
func (d *delivery) Group() string              { return d.s.key.group }
func (d *delivery) Attempt() int               { return d.attempt }
func (d *delivery) MaxAttempts() int           { return d.s.opts.MaxAttempts }

func (d *delivery) Deadline() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.deadline
}

// Ack implements [facade.Delivery]: it sends ACK and waits for the
// gateway's answer. A lease that ended meanwhile (its deadline passed, or
// the connection that delivered it dropped and the gateway handed it back)
// gives an error wrapping facade.ErrExpired.
func (d *delivery) Ack(ctx context.Context) error {
	return d.settle(ctx, wire.OpAck, "", true)
}

// Nack implements [facade.Delivery] with NACK.
func (d *delivery) Nack(ctx context.Context, reason string) error {
	return d.settle(ctx, wire.OpNack, truncate(reason, 1024), true)
}

// settle sends op once; wait says whether to wait for the gateway's answer.
func (d *delivery) settle(ctx context.Context, op, reason string, wait bool) error {
	d.mu.Lock()
	if d.done {
		d.mu.Unlock()
		return d.settledErr()
	}
	d.done = true
	d.mu.Unlock()
	defer d.s.settled(d)
	if d.s.gone.Load() {
		return fmt.Errorf("%w: the subscription of %s/%s ended and %s was handed back", facade.ErrClosed, d.s.key.topic, d.s.key.group, d.ev.ID)
	}
	if !wait {
		// An ACK is encoded by the writer, into the message it goes out
		// in; a NACK (rare, with its reason) here.
		of := outFrame{ack: d}
		if op != wire.OpAck {
			// Sized for the frame, so that it is one allocation.
			of.b = make([]byte, 0, 80+len(d.s.key.topic)+len(d.s.key.group)+len(d.ev.ID)+2*len(reason))
			of.b = wire.AppendAck(of.b, op, "", d.s.key.topic, d.s.key.group, d.ev.ID, d.attempt, reason, 0)
		}
		if err := d.cn.sendFrame(ctx, of); err != nil {
			d.s.c.log.Debug("ack not sent", "id", d.ev.ID, "err", err)
			return d.leaseEnded(err)
		}
		return nil
	}
	ctx, cancel := d.s.c.withTimeout(ctx)
	defer cancel()
	_, err := d.cn.request(ctx, &wire.Frame{Op: op, Topic: d.s.key.topic, Group: d.s.key.group, ID: d.ev.ID, Attempt: d.attempt, Reason: reason})
	return d.leaseEnded(err)
}

func (d *delivery) settledErr() error {
	return fmt.Errorf("%w: %s of %s/%s", facade.ErrSettled, d.ev.ID, d.s.key.topic, d.s.key.group)
}

// leaseEnded maps the gateway's unknown_id and a dropped connection (the
// gateway hands the events of a closed connection back) to ErrExpired.
func (d *delivery) leaseEnded(err error) error {
	if errors.Is(err, facade.ErrUnknownID) || errors.Is(err, facade.ErrUnavailable) {
		return fmt.Errorf("%w: %s of %s/%s: %w", facade.ErrExpired, d.ev.ID, d.s.key.topic, d.s.key.group, err)
	}
	return err
}

// Extend implements [facade.Delivery] with MODACK: the lease moves to
// now + by (at least one second; the gateway caps it at its
// MaxAckTimeout).
func (d *delivery) Extend(ctx context.Context, by time.Duration) error {
	if by <= 0 {
		return fmt.Errorf("%w: extension must be positive", facade.ErrInvalidOption)
	}
	d.mu.Lock()
	done := d.done
	d.mu.Unlock()
	if done {
		return d.settledErr()
	}
	ms := (by + time.Millisecond - 1).Milliseconds()
	ctx, cancel := d.s.c.withTimeout(ctx)
	defer cancel()
	sent := time.Now()
	if _, err := d.cn.request(ctx, &wire.Frame{Op: wire.OpModAck, Topic: d.s.key.topic, Group: d.s.key.group, ID: d.ev.ID, Attempt: d.attempt, ExtendMs: ms}); err != nil {
		return d.leaseEnded(err)
	}
	d.mu.Lock()
	d.deadline = sent.Add(max(by, time.Second))
	d.mu.Unlock()
	return nil
}

// AfterExpire implements [facade.Delivery]: f runs once the deadline (as
// the gateway advertised it, moved by Extend) has passed without Ack or
// Nack.
func (d *delivery) AfterExpire(f func()) {
	var check func()
	check = func() {
		d.mu.Lock()
		done, left := d.done, time.Until(d.deadline)
		d.mu.Unlock()
		switch {
		case done:
		case left > 0:
			time.AfterFunc(left, check)
		default:
			go f()
		}
	}
	check()
}
