package gateway

import (
	"cmp"
	"slices"
	"sync/atomic"
	"time"

	"github.com/eventhub/eventhub/inspect"
	"github.com/eventhub/eventhub/wire"
)

// Named is implemented by principals that have a name to show in
// [Gateway.Sessions] (auth.Identity's subject).
type Named interface {
	Name() string
}

// sessionMeta is what the admin API shows of a session beyond its
// subscriptions. id, remote and started are set before the session is
// listed and never change; principal is set on each AUTH.
type sessionMeta struct {
	id        uint64
	remote    string
	started   time.Time
	principal atomic.Pointer[string]
}

func (m *sessionMeta) setPrincipal(p Principal) {
	name := principalName(p)
	m.principal.Store(&name)
}

// Sessions returns a snapshot of the open sessions, by ID. It walks the
// sessions under their locks, as [Gateway.Stats] does; safe for concurrent
// use.
func (g *Gateway) Sessions() []inspect.SessionInfo {
	g.mu.Lock()
	type entry struct {
		s *session
		t transport
	}
	all := make([]entry, 0, len(g.sessions))
	for s, t := range g.sessions {
		all = append(all, entry{s, t})
	}
	g.mu.Unlock()
	out := make([]inspect.SessionInfo, 0, len(all))
	for _, e := range all {
		s := e.s
		si := inspect.SessionInfo{ID: s.meta.id, Remote: s.meta.remote, StartedMs: s.meta.started.UnixMilli(),
			Subscriptions: []inspect.SubscriptionStats{}}
		if p := s.meta.principal.Load(); p != nil {
			si.Principal = *p
		}
		s.mu.Lock()
		for k, sub := range s.subs {
			si.Subscriptions = append(si.Subscriptions, inspect.SubscriptionStats{Topic: k.topic, Group: k.group, InFlight: len(sub.leases)})
			si.InFlight += len(sub.leases)
		}
		s.mu.Unlock()
		slices.SortFunc(si.Subscriptions, func(a, b inspect.SubscriptionStats) int {
			return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Group, b.Group))
		})
		if wt, ok := e.t.(*wsTransport); ok {
			wt.qmu.Lock()
			si.Queue = len(wt.q)
			wt.qmu.Unlock()
		}
		out = append(out, si)
	}
	slices.SortFunc(out, func(a, b inspect.SessionInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Disconnect closes session id with close code 4004 (disconnected) after
// the frames already queued; its in-flight events go back to their groups
// as on any disconnect. It reports whether the session was open. It does
// not block on the connection.
func (g *Gateway) Disconnect(id uint64) bool {
	g.mu.Lock()
	var found *session
	for s := range g.sessions {
		if s.meta.id == id {
			found = s
			break
		}
	}
	g.mu.Unlock()
	if found == nil {
		return false
	}
	found.log.Info("session disconnected by an operator")
	found.closeWith(wire.CloseDisconnected, wire.CodeDisconnected)
	return true
}
