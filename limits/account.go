package limits

import (
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
)

// ApplyAccount sets a's JetStream limits on the account the embedded
// server srv runs the hub in (its global account). NATS enforces them for
// every client of that account, the hub and native clients alike, and for
// the streams the hub keeps for itself (dead letters, quota counters). It
// does nothing when a is zero. Storage or memory beyond what JetStream has
// on the server is refused with an error that names the setting and what
// the server has.
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
	err := srv.GlobalAccount().UpdateJetStreamLimits(map[string]server.JetStreamAccountLimits{"": lim})
	if err == nil {
		return nil
	}
	js := srv.JetStreamConfig()
	switch {
	case js != nil && server.IsNatsErr(err, server.JSStorageResourcesExceededErr):
		// The embedded server gives JetStream three quarters of the disk
		// space free in its store directory when it starts.
		return fmt.Errorf("limits: limits.account.maxStorageBytes is %s, more than the %s JetStream may store on this server "+
			"(three quarters of the %s that were free on the disk of %s when it started); "+
			"lower it, free disk space, or set it to 0 (no account limit): %w",
			byteSize(a.MaxStorageBytes), byteSize(js.MaxStore), byteSize(js.MaxStore/3*4), js.StoreDir, err)
	case js != nil && server.IsNatsErr(err, server.JSMemoryResourcesExceededErr):
		return fmt.Errorf("limits: limits.account.maxMemoryBytes is %s, more than the %s of memory JetStream may use on this server "+
			"(three quarters of the system's memory); lower it, or set it to 0 (no account limit): %w",
			byteSize(a.MaxMemoryBytes), byteSize(js.MaxMemory), err)
	}
	return fmt.Errorf("limits: account JetStream limits: %w", err)
}

// byteSize says n bytes in the largest binary unit that keeps it above 1,
// with the exact count.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", float64(n)/float64(div), "KMGTPE"[exp], n)
}
