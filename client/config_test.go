package client

import (
	"testing"
	"time"
)

// TestConfigValidateIsDeterministic: every invalid setting is reported, in
// the order of the fields, the same way every time.
func TestConfigValidateIsDeterministic(t *testing.T) {
	c := Config{RequestTimeout: -1, IdleTimeout: -1, ReconnectMin: -time.Second, OutboundQueue: -1}
	const want = "client: RequestTimeout must not be negative\n" +
		"client: IdleTimeout must not be negative\n" +
		"client: ReconnectMin must not be negative\n" +
		"client: OutboundQueue must not be negative"
	for range 20 {
		if err := c.Validate(); err == nil || err.Error() != want {
			t.Fatalf("Validate:\n%v\nwant\n%s", err, want)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("the zero Config: %v", err)
	}
}
