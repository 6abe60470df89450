package auth

import (
	"strings"
	"testing"
)

// TestHubInboxIsNotTheHubToken: the hub's inbox prefix is the reply
// subject of every hub publish, so every topic subscriber sees it; it must
// share nothing with the secret the hub's connection authenticates with.
func TestHubInboxIsNotTheHubToken(t *testing.T) {
	n := NewNATS(nil, nil, nil)
	inbox := strings.TrimPrefix(n.HubInboxPrefix(), "_EHUB_")
	if len(inbox) < 16 {
		t.Fatalf("hub inbox prefix %q", n.HubInboxPrefix())
	}
	if strings.Contains(n.HubToken(), inbox[:8]) {
		t.Fatalf("the hub inbox prefix %q repeats part of the hub token", n.HubInboxPrefix())
	}
}
