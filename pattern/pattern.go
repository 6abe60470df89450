// Package pattern is eventhub's one topic-pattern type: its syntax, matching
// topics, and comparing two patterns (covers, intersects). Access policies
// (package acl), rate limits (package limits) and wildcard subscriptions
// (package jetstream) compile patterns with it.
//
// Topics are "."-separated, non-empty segments, e.g. "heartbeat.received".
// A pattern ([Compile]) is the same with wildcards:
//
//   - a literal segment matches itself exactly;
//   - "*" matches exactly one segment;
//   - "**" matches ONE OR MORE segments, at any position, any number of
//     times.
//
// Decision: "**" never matches zero segments. So "a.**" matches "a.b" and
// "a.b.c" but not "a"; "**.c" matches "x.c" and "x.y.c" but not "c";
// "a.**.c" matches "a.x.c" and "a.x.y.c" but not "a.c"; "**" alone matches
// every valid topic. To grant "a" and everything below it, list both "a"
// and "a.**".
//
// Invalid patterns (error wrapping [ErrBadPattern]): empty, an empty segment,
// '*' mixed with other characters ("a*", "***"), a ">" segment (reserved: it
// is the NATS full wildcard), whitespace or control characters. Patterns
// are compiled once; matching is allocation-free for topics of up to 16
// segments and runs in O(pattern × topic) worst case.
package pattern

import (
	"fmt"
	"strings"

	"github.com/eventhub/eventhub/facade"
)

// ErrBadPattern means a topic pattern is invalid (empty, empty segment, a
// segment mixing '*' with other characters such as "a*" or "***", a ">"
// segment, whitespace or control characters). It is a *facade.Error:
// test with errors.Is.
var ErrBadPattern = &facade.Error{Code: "bad_pattern", Msg: "invalid topic pattern"}

// segKind is the kind of one compiled pattern segment.
type segKind uint8

const (
	segLit  segKind = iota // a literal segment, matched exactly
	segOne                 // "*": exactly one segment
	segMany                // "**": one or more segments
)

// segment is one compiled pattern segment.
type segment struct {
	kind segKind
	lit  string // only for segLit
}

// accepts reports whether the segment, as a single-symbol step, accepts the
// topic segment s. segMany accepts its first segment like segOne.
func (g segment) accepts(s string) bool {
	return g.kind != segLit || g.lit == s
}

// Pattern is a compiled topic pattern. The zero Pattern matches nothing.
//
// Syntax: segments separated by "."; "*" matches exactly one segment; "**"
// matches one or more segments (never zero) and may appear at any position,
// any number of times; any other segment matches itself literally.
//
// A Pattern is immutable and safe for concurrent use by multiple goroutines.
type Pattern struct {
	src     string
	segs    []segment
	literal bool // no wildcard: Match is a string comparison
}

// Compile parses and validates a topic pattern. Invalid patterns
// return an error wrapping ErrBadPattern: the empty pattern, an empty segment
// ("a..b", ".a", "a."), a segment mixing '*' with anything else ("a*",
// "*b", "***"), a ">" segment (reserved: it is the NATS full wildcard), and
// any whitespace or control character.
func Compile(pattern string) (Pattern, error) {
	if pattern == "" {
		return Pattern{}, fmt.Errorf("%w: empty pattern", ErrBadPattern)
	}
	segs := make([]segment, 0, strings.Count(pattern, ".")+1)
	literal := true
	rest := pattern
	for i := 0; ; i++ {
		part, tail, more := strings.Cut(rest, ".")
		switch {
		case part == "":
			return Pattern{}, fmt.Errorf("%w: pattern %q: segment %d is empty", ErrBadPattern, pattern, i+1)
		case part == "*":
			segs = append(segs, segment{kind: segOne})
			literal = false
		case part == "**":
			segs = append(segs, segment{kind: segMany})
			literal = false
		case strings.Contains(part, "*"):
			return Pattern{}, fmt.Errorf("%w: pattern %q: segment %q: '*' must be a whole segment (\"*\" or \"**\")", ErrBadPattern, pattern, part)
		case part == ">":
			return Pattern{}, fmt.Errorf("%w: pattern %q: \">\" is reserved; use \"**\"", ErrBadPattern, pattern)
		case HasSpaceOrControl(part):
			return Pattern{}, fmt.Errorf("%w: pattern %q: segment %d contains whitespace or a control character", ErrBadPattern, pattern, i+1)
		default:
			segs = append(segs, segment{kind: segLit, lit: part})
		}
		if !more {
			break
		}
		rest = tail
	}
	return Pattern{src: pattern, segs: segs, literal: literal}, nil
}

// HasSpaceOrControl reports whether s contains an ASCII space, an ASCII
// control character or DEL. Such characters are never valid in patterns,
// in topics or in group names.
func HasSpaceOrControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return true
		}
	}
	return false
}

// String returns the pattern's source text ("" for the zero Pattern).
func (p Pattern) String() string { return p.src }

// IsLiteral reports whether the pattern has no wildcard segment.
func (p Pattern) IsLiteral() bool { return p.literal && len(p.segs) > 0 }

// HasWildcard reports whether s, compiled or not, has a "*" or "**"
// segment: it is a pattern rather than a topic.
func HasWildcard(s string) bool {
	for seg := range strings.SplitSeq(s, ".") {
		if seg == "*" || seg == "**" {
			return true
		}
	}
	return false
}

// NATSSubject returns the pattern as a NATS subject filter: "*" stays,
// "**" becomes ">". ok is false when a "**" is not the last segment, which
// NATS subjects cannot express.
func (p Pattern) NATSSubject() (subject string, ok bool) {
	if p.literal {
		return p.src, true
	}
	parts := make([]string, len(p.segs))
	for i, g := range p.segs {
		switch {
		case g.kind == segOne:
			parts[i] = "*"
		case g.kind == segMany && i < len(p.segs)-1:
			return "", false
		case g.kind == segMany:
			parts[i] = ">"
		default:
			parts[i] = g.lit
		}
	}
	return strings.Join(parts, "."), true
}

// Match reports whether topic matches the pattern. The topic is taken
// literally: a topic segment "*" is just the string "*". A topic that is
// empty or has an empty segment never matches. Match does not allocate for
// topics of up to 16 segments.
func (p Pattern) Match(topic string) bool {
	if len(p.segs) == 0 {
		return false
	}
	if p.literal {
		return topic == p.src
	}
	var buf [16]string
	segs, ok := SplitTopic(topic, buf[:0])
	if !ok {
		return false
	}
	return matchSegs(p.segs, segs)
}

// MatchSplit is Match with the topic already split by the caller
// ([SplitTopic]; segs is non-empty): for matching one topic against many
// patterns.
func (p *Pattern) MatchSplit(topic string, segs []string) bool {
	if p.literal {
		return topic == p.src
	}
	// cheap rejection on a literal first segment, the common case
	if g := p.segs[0]; g.kind == segLit && g.lit != segs[0] {
		return false
	}
	return matchSegs(p.segs, segs)
}

// SplitTopic appends the "."-separated segments of topic to dst. ok is false
// if topic is empty or has an empty segment.
func SplitTopic(topic string, dst []string) (segs []string, ok bool) {
	if topic == "" {
		return dst, false
	}
	for {
		i := strings.IndexByte(topic, '.')
		if i < 0 {
			if topic == "" {
				return dst, false
			}
			return append(dst, topic), true
		}
		if i == 0 {
			return dst, false
		}
		dst = append(dst, topic[:i])
		topic = topic[i+1:]
	}
}

// matchSegs matches topic segments against compiled pattern segments.
//
// It is the classic greedy wildcard algorithm with single-point
// backtracking, over segments instead of bytes, where "**" is treated as
// "one segment" followed by "zero or more segments". Only the most recent
// "**" needs to be remembered: if a later one exists, any match reachable by
// stretching an earlier one is also reachable by stretching the later one.
// Worst case O(len(pat) * len(topic)), no allocation, no recursion.
func matchSegs(pat []segment, topic []string) bool {
	pi, ti := 0, 0
	starPi, starTi := -1, 0 // resume point after the last "**"
	for ti < len(topic) {
		if pi < len(pat) {
			g := pat[pi]
			switch {
			case g.kind == segMany:
				// consume the mandatory segment, then remember where the
				// zero-or-more tail starts
				pi++
				ti++
				starPi, starTi = pi, ti
				continue
			case g.accepts(topic[ti]):
				pi++
				ti++
				continue
			}
		}
		if starPi < 0 {
			return false
		}
		// let the last "**" absorb one more segment and retry
		starTi++
		pi, ti = starPi, starTi
	}
	return pi == len(pat)
}

// loops reports whether NFA state k (after consuming k pattern segments)
// has a self-loop, i.e. the segment just consumed was "**".
func loops(pat []segment, k int) bool {
	return k > 0 && pat[k-1].kind == segMany
}

// Intersects reports whether some topic matches both p and q.
func (p Pattern) Intersects(q Pattern) bool { return intersects(p.segs, q.segs) }

// Covers reports whether every topic q matches is also matched by p. It
// answers false when p has more than 63 segments (the safe answer for
// authorization).
func (p Pattern) Covers(q Pattern) bool { return covers(p.segs, q.segs) }

// intersects reports whether some topic matches both a and b. It explores
// the product of the two patterns' automata (state k = k segments consumed;
// a "**" consumes one segment to advance and then loops). The alphabet is
// infinite, so two steps are compatible unless both are different literals.
func intersects(a, b []segment) bool {
	w := len(b) + 1
	seen := make([]bool, (len(a)+1)*w)
	stack := []int{0}
	seen[0] = true
	type step struct {
		to  int
		lit string // "" = any segment
	}
	var as, bs []step
	for len(stack) > 0 {
		st := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		i, j := st/w, st%w
		if i == len(a) && j == len(b) {
			return true
		}
		as, bs = as[:0], bs[:0]
		if i < len(a) {
			as = append(as, step{i + 1, a[i].lit})
		}
		if loops(a, i) {
			as = append(as, step{i, ""})
		}
		if j < len(b) {
			bs = append(bs, step{j + 1, b[j].lit})
		}
		if loops(b, j) {
			bs = append(bs, step{j, ""})
		}
		for _, x := range as {
			for _, y := range bs {
				if x.lit != "" && y.lit != "" && x.lit != y.lit {
					continue
				}
				n := x.to*w + y.to
				if !seen[n] {
					seen[n] = true
					stack = append(stack, n)
				}
			}
		}
	}
	return false
}

// maxCoverSegs bounds the covering pattern's length in covers, whose subset
// construction uses a uint64 bit set of states.
const maxCoverSegs = 63

// covers reports whether every topic matched by s is also matched by p
// (language inclusion). It runs s's automaton against the subset
// construction of p's automaton, over the symbol classes "each literal
// mentioned in p or s" plus "any other segment" (both automata treat all
// unmentioned segments alike, so one representative suffices). It returns
// false (not covered) when p has more than maxCoverSegs segments, which is
// the safe answer for authorization.
func covers(p, s []segment) bool {
	if len(p) > maxCoverSegs {
		return false
	}
	// symbol classes; "" stands for "any other segment" (literals are
	// never empty)
	classes := []string{""}
	seenLit := map[string]bool{}
	for _, pat := range [][]segment{p, s} {
		for _, g := range pat {
			if g.kind == segLit && !seenLit[g.lit] {
				seenLit[g.lit] = true
				classes = append(classes, g.lit)
			}
		}
	}
	accepts := func(g segment, c string) bool { return g.kind != segLit || g.lit == c }
	stepP := func(set uint64, c string) uint64 {
		var next uint64
		for k := 0; k <= len(p); k++ {
			if set&(1<<k) == 0 {
				continue
			}
			if k < len(p) && accepts(p[k], c) {
				next |= 1 << (k + 1)
			}
			if loops(p, k) {
				next |= 1 << k
			}
		}
		return next
	}
	type state struct {
		s int
		p uint64
	}
	acceptP := uint64(1) << len(p)
	start := state{0, 1}
	seen := map[state]bool{start: true}
	stack := []state{start}
	for len(stack) > 0 {
		st := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if st.s == len(s) && st.p&acceptP == 0 {
			return false // a topic of s that p rejects
		}
		for _, c := range classes {
			np := stepP(st.p, c)
			push := func(ns int) {
				n := state{ns, np}
				if !seen[n] {
					seen[n] = true
					stack = append(stack, n)
				}
			}
			if st.s < len(s) && accepts(s[st.s], c) {
				push(st.s + 1)
			}
			if loops(s, st.s) {
				push(st.s)
			}
		}
	}
	return true
}
