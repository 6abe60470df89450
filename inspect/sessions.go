package inspect

// SessionInfo describes one open WebSocket session, for the admin API.
type SessionInfo struct {
	// ID numbers the session within its gateway (from 1, never reused
	// while the gateway runs).
	ID uint64 `json:"id"`
	// Principal names who authenticated; empty before AUTH or for
	// principals without a name.
	Principal string `json:"principal"`
	// Remote is the client's address as the server saw it.
	Remote string `json:"remote"`
	// StartedMs is when the connection was accepted (epoch ms).
	StartedMs     int64               `json:"startedMs"`
	Subscriptions []SubscriptionStats `json:"subscriptions"`
	// InFlight counts the session's events delivered and not yet settled;
	// Queue the frames waiting to be written to the client.
	InFlight int `json:"inFlight"`
	Queue    int `json:"queue"`
}

// SubscriptionStats is one subscription's events on the wire.
type SubscriptionStats struct {
	Topic string `json:"topic"`
	Group string `json:"group,omitempty"` // empty for a live subscription
	// InFlight counts the events delivered to the client and not yet
	// acknowledged, nacked or expired.
	InFlight int `json:"inFlight"`
}
