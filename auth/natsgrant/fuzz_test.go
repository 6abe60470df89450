package natsgrant_test

import (
	"math/rand/v2"
	"testing"
	"time"
)

// checkSpec compiles a spec and reports the first difference between its
// grant and the ACL.
// checkSpec compiles a spec and fails on the first difference between its
// grant and the ACL; ok is false when the spec is not well formed or its
// policy is refused, ops is the number of operations checked.
func checkSpec(t *testing.T, sp spec) (ok bool, ops int) {
	t.Helper()
	sc, ok := sp.scenario()
	if !ok {
		return false, 0
	}
	c, ok, err := sc.compile()
	if err != nil {
		t.Fatalf("%s: %v", sc, err)
	}
	if !ok {
		return false, 0
	}
	d, ops := c.check()
	if d != "" {
		t.Fatalf("%s\ngrant %+v\n%s", sc, c.grant, d)
	}
	return true, ops
}

// FuzzGrantMatchesACL: for any policy and catalogue, what the compiled
// grant lets NATS do is what the ACL lets the same principal do over
// WebSocket: nothing more, and nothing less but where the package says
// NATS cannot express it. The corpus under testdata/fuzz holds the
// escalations found so far.
func FuzzGrantMatchesACL(f *testing.F) {
	f.Fuzz(func(t *testing.T, rules, topics string, own, unlisted bool) {
		checkSpec(t, spec{rules: rules, topics: topics, own: own, unlisted: unlisted})
	})
}

// TestGrantMatchesACL runs the differential check on generated specs: a
// few thousand policies, each tried with every operation its scenario
// holds (hundreds of thousands in all). A failure prints the spec, to add
// to the fuzz corpus once fixed.
func TestGrantMatchesACL(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 22))
	n := 800
	if testing.Short() {
		n = 300
	}
	deadline := time.Now().Add(15 * time.Second)
	compiled, ops := 0, 0
	for i := 0; i < n && time.Now().Before(deadline); i++ {
		sp := randomSpec(r)
		ok, o := checkSpec(t, sp)
		if t.Failed() {
			t.Logf("seed %d, spec %#v", seed, sp)
			return
		}
		if ok {
			compiled++
			ops += o
		}
	}
	t.Logf("seed %d: %d policies compiled, %d operations checked", seed, compiled, ops)
	if ops < 100_000 {
		t.Errorf("only %d operations checked", ops)
	}
}
