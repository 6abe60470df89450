package pattern

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/eventhub/eventhub/internal/testutil"
)

// refValidPattern is a straightforward restatement of the pattern syntax.
func refValidPattern(p string) bool {
	if p == "" {
		return false
	}
	for _, s := range strings.Split(p, ".") {
		if s == "" || s == ">" || strings.ContainsAny(s, " \t\n\r\v\f") {
			return false
		}
		for _, c := range []byte(s) {
			if c <= ' ' || c == 0x7f {
				return false
			}
		}
		if strings.Contains(s, "*") && s != "*" && s != "**" {
			return false
		}
	}
	return true
}

// refMatch is the reference matcher: plain recursion over segments.
func refMatch(pattern, topic string) bool {
	if topic == "" {
		return false
	}
	ts := strings.Split(topic, ".")
	for _, s := range ts {
		if s == "" {
			return false
		}
	}
	return refMatchSegs(strings.Split(pattern, "."), ts)
}

func refMatchSegs(p, t []string) bool {
	if len(p) == 0 {
		return len(t) == 0
	}
	if len(t) == 0 {
		return false
	}
	switch p[0] {
	case "**":
		for k := 1; k <= len(t); k++ {
			if refMatchSegs(p[1:], t[k:]) {
				return true
			}
		}
		return false
	case "*":
		return refMatchSegs(p[1:], t[1:])
	default:
		return p[0] == t[0] && refMatchSegs(p[1:], t[1:])
	}
}

func mustPattern(tb testing.TB, s string) Pattern {
	tb.Helper()
	p, err := Compile(s)
	if err != nil {
		tb.Fatalf("Compile(%q): %v", s, err)
	}
	return p
}

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern string
		yes     []string
		no      []string
	}{
		{"a.b", []string{"a.b"}, []string{"a", "a.b.c", "a.c", "b.b", "", "a.b.", "a..b"}},
		{"*", []string{"a", "*", "**"}, []string{"a.b", ""}},
		{"a.*", []string{"a.b", "a.*"}, []string{"a", "a.b.c", "b.b"}},
		{"*.b", []string{"a.b", "x.b"}, []string{"b", "a.c", "x.y.b"}},
		{"a.*.c", []string{"a.b.c"}, []string{"a.c", "a.b.b.c"}},
		{"**", []string{"a", "a.b", "a.b.c.d.e"}, []string{"", ".", "a..b", "a.", ".a"}},
		{"a.**", []string{"a.b", "a.b.c", "a.b.c.d"}, []string{"a", "b.c", "ab.c"}},
		{"**.c", []string{"x.c", "x.y.c", "c.c"}, []string{"c", "x.c.d", "x.cc"}},
		{"a.**.c", []string{"a.x.c", "a.x.y.c", "a.c.c", "a.c.c.c"}, []string{"a.c", "a.x.y", "b.x.c", "a.x.c.d"}},
		{"**.b.**", []string{"a.b.c", "x.y.b.z.w", "b.b.b"}, []string{"b", "a.b", "b.c", "a.c.d"}},
		{"**.**", []string{"a.b", "a.b.c"}, []string{"a"}},
		{"a.**.b.**.c", []string{"a.x.b.y.c", "a.x.x.b.y.y.c", "a.b.b.b.c"}, []string{"a.b.c", "a.x.b.c", "a.x.b.y"}},
		{"*.**", []string{"a.b", "a.b.c"}, []string{"a"}},
		{"**.*.x", []string{"a.b.x", "a.b.c.x"}, []string{"a.x", "x"}},
		{"heartbeat.received", []string{"heartbeat.received"}, []string{"heartbeat", "heartbeat.received.x"}},
		{"tenant:1.events", []string{"tenant:1.events"}, []string{"tenant:2.events"}},
	}
	for _, tt := range tests {
		p := mustPattern(t, tt.pattern)
		for _, topic := range tt.yes {
			if !p.Match(topic) {
				t.Errorf("%q.Match(%q) = false, want true", tt.pattern, topic)
			}
			if !refMatch(tt.pattern, topic) {
				t.Errorf("reference disagrees with table: %q vs %q should match", tt.pattern, topic)
			}
		}
		for _, topic := range tt.no {
			if p.Match(topic) {
				t.Errorf("%q.Match(%q) = true, want false", tt.pattern, topic)
			}
		}
	}
	var zero Pattern
	if zero.Match("a") || zero.IsLiteral() || zero.String() != "" {
		t.Error("zero Pattern must match nothing")
	}
}

func TestCompile(t *testing.T) {
	tests := []struct {
		pattern string
		wantErr error
		literal bool
	}{
		{"a", nil, true},
		{"a.b.c", nil, true},
		{"*", nil, false},
		{"**", nil, false},
		{"a.**.b", nil, false},
		{"x:y.z-1_2", nil, true},
		{"", ErrBadPattern, false},
		{".", ErrBadPattern, false},
		{"a..b", ErrBadPattern, false},
		{".a", ErrBadPattern, false},
		{"a.", ErrBadPattern, false},
		{"***", ErrBadPattern, false},
		{"a*", ErrBadPattern, false},
		{"*a", ErrBadPattern, false},
		{"a.b*.c", ErrBadPattern, false},
		{"a.**b", ErrBadPattern, false},
		{"a.>", ErrBadPattern, false},
		{"a b", ErrBadPattern, false},
		{"a.\tb", ErrBadPattern, false},
		{"a\x00", ErrBadPattern, false},
	}
	for _, tt := range tests {
		p, err := Compile(tt.pattern)
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
			t.Errorf("Compile(%q) error = %v, want %v", tt.pattern, err, tt.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if p.String() != tt.pattern || p.IsLiteral() != tt.literal {
			t.Errorf("Compile(%q) = %q literal=%v, want literal=%v", tt.pattern, p.String(), p.IsLiteral(), tt.literal)
		}
		if got := refValidPattern(tt.pattern); got != (tt.wantErr == nil) {
			t.Errorf("refValidPattern(%q) = %v disagrees with table", tt.pattern, got)
		}
	}
}

// randPattern and randTopic draw from a tiny alphabet so that matches are
// frequent.
func randPattern(r *rand.Rand, maxSegs int) string {
	segs := []string{"a", "b", "c", "*", "**"}
	n := 1 + r.IntN(maxSegs)
	out := make([]string, n)
	for i := range out {
		out[i] = segs[r.IntN(len(segs))]
	}
	return strings.Join(out, ".")
}

func randTopic(r *rand.Rand, maxSegs int) string {
	segs := []string{"a", "b", "c", "d"}
	n := 1 + r.IntN(maxSegs)
	out := make([]string, n)
	for i := range out {
		out[i] = segs[r.IntN(len(segs))]
	}
	return strings.Join(out, ".")
}

func TestMatchAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	matches := 0
	const n = 5000
	for range n {
		pat, topic := randPattern(r, 6), randTopic(r, 8)
		p := mustPattern(t, pat)
		got, want := p.Match(topic), refMatch(pat, topic)
		if got != want {
			t.Fatalf("%q.Match(%q) = %v, reference says %v", pat, topic, got, want)
		}
		if got {
			matches++
		}
	}
	// guard against a generator that only produces trivial non-matches
	if matches < n/20 {
		t.Fatalf("only %d of %d cases matched; generator too weak", matches, n)
	}
}

// TestCoversIntersectsAgainstBruteForce checks the pattern-vs-pattern
// analyses used for wildcard subscriptions against enumeration of all
// topics up to 6 segments ("d" stands for every unmentioned segment).
func TestCoversIntersectsAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	topics := testutil.AllTopics([]string{"a", "b", "c", "d"}, 6)
	var nCover, nInter int
	for range 400 {
		ps, ss := randPattern(r, 3), randPattern(r, 3)
		p, s := mustPattern(t, ps), mustPattern(t, ss)
		bfInter, bfCover := false, true
		for _, topic := range topics {
			inS := s.Match(topic)
			inP := p.Match(topic)
			if inS && inP {
				bfInter = true
			}
			if inS && !inP {
				bfCover = false
			}
		}
		// a witness of an intersection of two patterns of <= 3 segments
		// needs at most 6 segments, so both directions must agree
		if got := p.Intersects(s); got != bfInter {
			t.Fatalf("intersects(%q, %q) = %v, brute force %v", ps, ss, got, bfInter)
		}
		// soundness: covers may never claim more than enumeration shows
		got := p.Covers(s)
		if got && !bfCover {
			t.Fatalf("covers(%q, %q) = true, but some topic of the second is not matched by the first", ps, ss)
		}
		if got != bfCover {
			t.Fatalf("covers(%q, %q) = %v, brute force (<=6 segments) %v", ps, ss, got, bfCover)
		}
		if got {
			nCover++
		}
		if bfInter {
			nInter++
		}
	}
	if nCover < 20 || nInter < 20 {
		t.Fatalf("weak generator: %d covered, %d intersecting", nCover, nInter)
	}
}

func TestCoversIntersectsTable(t *testing.T) {
	tests := []struct {
		p, s         string
		covers, meet bool
	}{
		{"**", "**", true, true},
		{"**", "a.*", true, true},
		{"a.*", "a.**", false, true},
		{"a.**", "a.*", true, true},
		{"a.**", "a.*.**", true, true},
		{"*.**", "**.x", true, true},
		{"**.x", "*.**", false, true},
		{"a.b", "a.*", false, true},
		{"a.*", "b.*", false, false},
		{"a.**.c", "a.*.c", true, true},
		{"a.**.c", "a.**", false, true},
		{"**.c", "a.**", false, true},
		{"x.**", "**", false, true},
		{"a", "**", false, true},
		{"a.*", "*", false, false},
	}
	for _, tt := range tests {
		p, s := mustPattern(t, tt.p), mustPattern(t, tt.s)
		if got := p.Covers(s); got != tt.covers {
			t.Errorf("covers(%q, %q) = %v, want %v", tt.p, tt.s, got, tt.covers)
		}
		if got := p.Intersects(s); got != tt.meet {
			t.Errorf("intersects(%q, %q) = %v, want %v", tt.p, tt.s, got, tt.meet)
		}
	}
	long := mustPattern(t, strings.Repeat("a.", 70)+"**")
	if long.Covers(mustPattern(t, "a.**")) {
		t.Error("covers must answer false (safe) for over-long covering patterns")
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	p := mustPattern(t, "a.**.c")
	allocs := testing.AllocsPerRun(100, func() {
		if !p.Match("a.b.b.b.b.b.b.b.b.b.b.c") {
			t.Fatal("no match")
		}
	})
	if allocs != 0 {
		t.Fatalf("Match allocates %v times per call", allocs)
	}
}

// FuzzMatch checks Compile against the reference syntax and Match
// against the reference matcher. The seed corpus is in
// testdata/fuzz/FuzzMatch.
func FuzzMatch(f *testing.F) {
	f.Add("a.**.c", "a.x.y.c")
	f.Fuzz(func(t *testing.T, pattern, topic string) {
		p, err := Compile(pattern)
		if valid := refValidPattern(pattern); valid != (err == nil) {
			t.Fatalf("Compile(%q) error = %v, reference validity %v", pattern, err, valid)
		}
		if err != nil {
			if !errors.Is(err, ErrBadPattern) {
				t.Fatalf("Compile(%q) error %v does not wrap ErrBadPattern", pattern, err)
			}
		} else if strings.Count(pattern, "**") <= 4 && strings.Count(topic, ".") <= 24 {
			// bounded so the exponential reference stays fast
			if got, want := p.Match(topic), refMatch(pattern, topic); got != want {
				t.Fatalf("%q.Match(%q) = %v, reference %v", pattern, topic, got, want)
			}
		}
		if lp, err := Compile(topic); err == nil && !lp.Match(topic) {
			t.Fatalf("pattern %q does not match the identical topic", topic)
		}
	})
}

func TestNATSSubject(t *testing.T) {
	for _, tc := range []struct {
		pattern, want string
		ok            bool
	}{
		{"orders.created", "orders.created", true},
		{"orders.*", "orders.*", true},
		{"orders.**", "orders.>", true},
		{"*.x.**", "*.x.>", true},
		{"**", ">", true},
		{"a.**.c", "", false},
		{"**.a", "", false},
	} {
		p, err := Compile(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := p.NATSSubject(); got != tc.want || ok != tc.ok {
			t.Errorf("NATSSubject(%q) = %q, %v, want %q, %v", tc.pattern, got, ok, tc.want, tc.ok)
		}
	}
}
