package gateway

import (
	"fmt"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/wire"
)

// sessionLive is a session as the sink of one live subscription.
type sessionLive struct {
	s    *session
	corr string // the SUBSCRIBE's, for its OK
}

func (l *sessionLive) sendLive(ev *liveEvent) bool { return l.queue(ev, l.s.t.SendShared) }

func (l *sessionLive) sendRecovered(ev *liveEvent) bool { return l.queue(ev, l.s.t.SendBacklog) }

// queue sends ev's frame with send; false when the session is too slow for
// it or closing, which ends the subscription.
func (l *sessionLive) queue(ev *liveEvent, send func([]byte) sendResult) bool {
	s := l.s
	if s.expired() {
		return true // the session is ending: nothing is written any more
	}
	switch send(ev.wsFrame()) {
	case queueFull:
		s.slow()
		return false
	case sendClosing:
		return false
	}
	return true
}

func (l *sessionLive) sendReady(r liveReady) {
	f := wire.Frame{Op: wire.OpOK, Corr: l.corr, Seq: r.Seq}
	if r.Recovery {
		f.Recovered = &r.Recovered
		f.First = r.First
	}
	b, err := wire.Encode(&f)
	if err != nil {
		return
	}
	l.s.send(&b)
}

// subscribeLive handles a SUBSCRIBE without a group: the topic's events
// from now on (or since opts.since, or after a snapshot), no acks.
func (s *session) subscribeLive(f *wire.Frame) error {
	if err := facade.ValidateTopic(f.Topic); err != nil {
		return err
	}
	if err := s.allow(ActionSubscribe, f.Topic, ""); err != nil {
		return err
	}
	var o wire.LiveOptions
	if err := wire.DecodeOpts(f.Opts, &o); err != nil {
		return err
	}
	if err := validLive(o); err != nil {
		return err
	}
	s.mu.Lock()
	_, dup := s.lives[f.Topic]
	switch {
	case s.ended:
		s.mu.Unlock()
		return facade.ErrClosed
	case dup:
		s.mu.Unlock()
		return wire.Errorf(wire.CodeAlreadySubscribed, "already following %s", f.Topic)
	case len(s.subs)+len(s.lives) >= s.gw.cfg.MaxSubscriptions:
		s.mu.Unlock()
		return wire.Errorf(wire.CodeBadRequest, "subscription limit (%d) reached", s.gw.cfg.MaxSubscriptions)
	}
	s.lives[f.Topic] = nil // starting
	s.mu.Unlock()

	ctx, cancel := s.reqCtx()
	defer cancel()
	release, err := s.gw.holdSubscription(ctx, s.principal)
	if err != nil {
		s.mu.Lock()
		delete(s.lives, f.Topic)
		s.mu.Unlock()
		return err
	}
	ctx = s.gw.bind(ctx, s.principal)
	ls, err := s.gw.follow(ctx, f.Topic, o, &sessionLive{s: s, corr: f.Corr})
	if err != nil {
		release()
	} else {
		ls.mu.Lock()
		ls.release = release
		ls.mu.Unlock()
	}
	s.mu.Lock()
	if err != nil {
		delete(s.lives, f.Topic)
		s.mu.Unlock()
		return err
	}
	if s.ended {
		s.mu.Unlock()
		s.gw.unfollow(ls)
		return nil
	}
	s.lives[f.Topic] = ls
	s.mu.Unlock()
	return nil
}

func (s *session) unsubscribeLive(f *wire.Frame) error {
	s.mu.Lock()
	ls, ok := s.lives[f.Topic]
	if !ok || ls == nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: not following %s", wire.ErrNotSubscribed, f.Topic)
	}
	delete(s.lives, f.Topic)
	s.mu.Unlock()
	s.gw.unfollow(ls)
	s.sendOK(f.Corr)
	return nil
}

// validLive checks the opts of a live SUBSCRIBE (or an SSE request).
func validLive(o wire.LiveOptions) error {
	if o.Since != nil && o.Snapshot {
		return wire.Errorf(wire.CodeBadRequest, "opts: since and snapshot exclude each other")
	}
	if o.KeyPrefix != nil {
		if err := facade.ValidateKey(*o.KeyPrefix); err != nil {
			return fmt.Errorf("opts.key_prefix: %w", err)
		}
	}
	return nil
}
