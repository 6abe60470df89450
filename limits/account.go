package limits

import (
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
)

// ApplyAccount sets a's JetStream limits on the account the embedded
// server srv runs the hub in (its global account). NATS enforces them for
// every client of that account, the hub and native clients alike, and for
// the streams the hub keeps for itself (dead letters, quota counters). It
// does nothing when a is zero.
func ApplyAccount(srv *server.Server, a AccountLimits) error {
	if a.IsZero() {
		return nil
	}
	orUnlimited := func(v int64) int64 {
		if v == 0 {
			return -1
		}
		return v
	}
	lim := server.JetStreamAccountLimits{
		MaxMemory:    orUnlimited(a.MaxMemoryBytes),
		MaxStore:     orUnlimited(a.MaxStorageBytes),
		MaxStreams:   int(orUnlimited(int64(a.MaxStreams))),
		MaxConsumers: int(orUnlimited(int64(a.MaxConsumers))),
	}
	if err := srv.GlobalAccount().UpdateJetStreamLimits(map[string]server.JetStreamAccountLimits{"": lim}); err != nil {
		return fmt.Errorf("limits: account JetStream limits: %w", err)
	}
	return nil
}
