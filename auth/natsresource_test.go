package auth

import (
	"context"
	"errors"
	"testing"
	"time"
)

// unlisted is a Directory whose streams cannot be listed.
type unlisted struct{}

var errUnlisted = errors.New("streams cannot be listed")

func (unlisted) TopicStreams(context.Context, string, bool) ([]Stream, error) {
	return nil, errUnlisted
}
func (unlisted) StreamNameFor(topic string) (string, bool)       { return "S_" + topic, false }
func (unlisted) ConsumerName(group, topic string, _ bool) string { return group }

// TestNativeConnectNeverLosesItsGrantsSilently: a native client whose
// JetStream grants cannot be computed (the streams cannot be listed) is
// refused, to connect again, rather than connected without them.
func TestNativeConnectNeverLosesItsGrantsSilently(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	a, err := New(t.Context(), Config{JWT: VerifierConfig{Secret: secret}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	n := NewNATS(a, nil, nil)
	n.SetDirectory(unlisted{})
	for _, scopes := range [][]string{
		{"subscribe:orders.*"},                       // looked up by filter
		{"publish:**", "subscribe:**"},               // every stream listed
		{"subscribe:orders.new", "publish:orders.*"}, // a literal and a wildcard
	} {
		tok, err := MintHS256(secret, MintClaims{Subject: "app", Scopes: scopes, TTL: time.Minute}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, own := range []bool{true, false} {
			if !own && scopes[0] == "publish:**" {
				continue // in a shared account such a rule gets no JetStream API at all
			}
			n.auth.nativeScoped = !own
			if _, perms, _, code := n.authorize(t.Context(), tok, own); code != "starting" {
				t.Errorf("%v (own account %v): code %q, permissions %+v; want refused as starting", scopes, own, code, perms)
			}
		}
	}
}
