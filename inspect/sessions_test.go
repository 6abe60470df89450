package inspect

import (
	"encoding/json"
	"testing"
)

// The console reads a session's subscriptions as {topic, group, inFlight}.
func TestSessionInfoJSON(t *testing.T) {
	b, err := json.Marshal(SessionInfo{ID: 1, Subscriptions: []SubscriptionStats{{Topic: "a.b", Group: "g", InFlight: 2}, {Topic: "live"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":1,"principal":"","remote":"","startedMs":0,"subscriptions":[{"topic":"a.b","group":"g","inFlight":2},{"topic":"live","inFlight":0}],"inFlight":0,"queue":0}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}
