package gateway

// SubscriptionStats is one subscription's events on the wire.
type SubscriptionStats struct {
	Topic, Group string
	// InFlight counts the events delivered to the client and not yet
	// acknowledged, nacked or expired.
	InFlight int
}

// Stats is a snapshot of the gateway, for metrics scrapes: reading it walks
// the sessions, so nothing is counted on the delivery path.
type Stats struct {
	Connections   int
	Subscriptions []SubscriptionStats
}

// Stats returns a snapshot of the open connections and their subscriptions.
func (g *Gateway) Stats() Stats {
	g.mu.Lock()
	sessions := make([]*session, 0, len(g.sessions))
	for s := range g.sessions {
		sessions = append(sessions, s)
	}
	g.mu.Unlock()
	st := Stats{Connections: len(sessions)}
	for _, s := range sessions {
		s.mu.Lock()
		for k, sub := range s.subs {
			st.Subscriptions = append(st.Subscriptions, SubscriptionStats{Topic: k.topic, Group: k.group, InFlight: len(sub.leases)})
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
