package gateway

import "github.com/eventhub/eventhub/inspect"

// Stats is a snapshot of the gateway, for metrics scrapes: reading it walks
// the sessions, so nothing is counted on the delivery path.
type Stats struct {
	Connections   int
	Subscriptions []inspect.SubscriptionStats
	// GroupMembers is how many bus members (one pull each) the gateway
	// runs: one per topic and group its connections subscribe to.
	GroupMembers int
	// LiveSubscribers counts the live subscriptions (WebSocket and SSE)
	// per topic; the gateway follows each of these topics once.
	LiveSubscribers map[string]int
	// LiveFanout counts the live events queued to subscribers so far;
	// LiveDrops the live subscriptions ended as too slow.
	LiveFanout, LiveDrops uint64
}

// Stats returns a snapshot of the open connections and their subscriptions.
func (g *Gateway) Stats() Stats {
	g.mu.Lock()
	sessions := make([]*session, 0, len(g.sessions))
	for s := range g.sessions {
		sessions = append(sessions, s)
	}
	g.mu.Unlock()
	st := Stats{Connections: len(sessions), LiveSubscribers: map[string]int{}}
	st.GroupMembers = g.members.len()
	for _, lt := range g.live.values() {
		lt.mu.Lock()
		st.LiveSubscribers[lt.topic] = lt.n
		lt.mu.Unlock()
	}
	st.LiveFanout, st.LiveDrops = g.liveFanout.Load(), g.liveDrops.Load()
	for _, s := range sessions {
		s.mu.Lock()
		for k, sub := range s.subs {
			st.Subscriptions = append(st.Subscriptions, inspect.SubscriptionStats{Topic: k.topic, Group: k.group, InFlight: len(sub.leases)})
		}
		s.mu.Unlock()
	}
	return st
}

func (g *Gateway) authFailed(transport, code string) {
	if f := g.cfg.OnAuthFailure; f != nil {
		f(transport, code)
	}
}
