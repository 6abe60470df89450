package jetstream

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// nakCounter is a delivered message that counts its NAKs.
type nakCounter struct {
	jetstream.Msg
	naks atomic.Int32
}

func (m *nakCounter) Nak() error { m.naks.Add(1); return nil }

// A member still pulling hands an event back at once; a stopping one only
// once its pull request is withdrawn (flushHandBacks), and every hand-back
// stays uncounted.
func TestHandBackWaitsForWithdrawal(t *testing.T) {
	pullCtx, stopPull := context.WithCancel(context.Background())
	s := &subscription{b: &Bus{}, pullCtx: pullCtx}
	m := &nakCounter{}
	key := releaseKey{"S", "C", 7}
	s.handBack(m, key)
	if n := m.naks.Load(); n != 1 {
		t.Fatalf("a pulling member's hand-back sent %d NAKs, want 1", n)
	}
	stopPull()
	s.handBack(m, key)
	s.handBack(m, key)
	if n := m.naks.Load(); n != 1 {
		t.Fatalf("a stopping member NAKed before its pull request was withdrawn (%d NAKs, want 1)", n)
	}
	s.flushHandBacks()
	if n := m.naks.Load(); n != 3 {
		t.Fatalf("after the withdrawal: %d NAKs, want 3", n)
	}
	s.handBack(m, key)
	if n := m.naks.Load(); n != 4 {
		t.Fatalf("a hand-back after the withdrawal: %d NAKs, want 4", n)
	}
	meta := &jetstream.MsgMetadata{Stream: "S", Consumer: "C", NumDelivered: 5, Sequence: jetstream.SequencePair{Stream: 7}}
	if got := s.b.released.attempt(meta); got != 1 {
		t.Fatalf("fifth delivery after four hand-backs: attempt %d, want 1", got)
	}
}
