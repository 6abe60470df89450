package natsgrant

import (
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/eventhub/eventhub/acl"
)

// keyMarker is the token that marks a keyed event's key: "T._k.<key>".
const keyMarker = "_k"

// systemEntry reports whether a policy entry names a subject outside the
// hub's topics: no topic segment begins with "$" or "_", so such a rule
// grants nothing over WebSocket or HTTP, and natively it would open system
// subjects ($JS.API…, _INBOX…) or the key marker ("a._k").
func systemEntry(e string) bool {
	s, _, _ := strings.Cut(e, " ")
	for t := range strings.SplitSeq(s, ".") {
		if strings.HasPrefix(t, "$") || strings.HasPrefix(t, "_") {
			return true
		}
	}
	return false
}

// hasQueue reports whether an entry is restricted to a queue group
// ("subject group").
func hasQueue(e string) bool { return strings.Contains(e, " ") }

// LeadingWildcard reports whether an entry (with an optional " group"
// suffix) begins with a wildcard.
func LeadingWildcard(e string) bool {
	s, _, _ := strings.Cut(e, " ")
	return s == ">" || s == "*" || strings.HasPrefix(s, "*.") || strings.HasPrefix(s, ">.")
}

// expandLeading replaces each entry that begins with a wildcard by the same
// entry on each of firsts: ">" becomes "t" and "t.>", "*.x" becomes "t.x".
func expandLeading(entries, firsts []string) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		if !LeadingWildcard(e) {
			out = append(out, e)
			continue
		}
		s, queue, queued := strings.Cut(e, " ")
		suffix := ""
		if queued {
			suffix = " " + queue
		}
		for _, t := range firsts {
			switch {
			case s == ">":
				out = append(out, t+suffix, t+".>"+suffix)
			case s == "*":
				out = append(out, t+suffix)
			default:
				out = append(out, t+s[1:]+suffix)
			}
		}
	}
	return out
}

// firstTokens lists, sorted, the first tokens of subjects that can be
// topics: not wildcards, not system subjects.
func firstTokens(subjects []string) []string {
	var out []string
	for _, subj := range subjects {
		t, _, _ := strings.Cut(subj, ".")
		if t == "" || t == "*" || t == ">" || systemEntry(t) || slices.Contains(out, t) {
			continue
		}
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// deny is a deny entry and the allow entry it was made for.
type deny struct {
	subject string
	owner   int
	// keyedOf is set when the deny holds only keyed events of the topics
	// of this pattern (literal tokens and "*", so a topic pattern too): it
	// is dropped when the policy grants every one of those topics.
	keyedOf string
}

// allowEntry is an allow entry and the policy entry it was made for.
type allowEntry struct {
	subject string
	owner   int
}

// permissions returns the allow and deny lists for the topic entries of
// one action (no queue groups).
//
// For an entry of n tokens:
//
//   - ending in a literal ("orders.new"): the entry and its keyed subjects
//     ("orders.new._k.*"); denied, for reading, what lies below a key
//     ("orders.new._k.*.>", never an event);
//   - ending in "*" ("orders.*"): for publishing, the entry and its keyed
//     subjects; for reading the entry only, and denied everything below it
//     ("orders.*.*", "orders.*.*.>"), since NATS lets "*" in an allow entry
//     accept a ">" subscription. A bare "*" cannot be denied so (its deny
//     would cover the client's inboxes);
//   - ending in ">": the entry, and denied the keyed subjects of the topic
//     it extends ("orders._k.*": "orders.**" does not reach "orders");
//   - with "*" as its one-but-last token ("secret.*.x", "secret.*.*.*"):
//     denied the keyed subjects of the shorter topic that this "*" matching
//     "_k" makes of it ("secret._k.x", "secret.*._k.*"); with ">" last, the
//     "*" before it likewise ("a.*.>": "a._k.*"). A "*" further ahead
//     matching "_k" makes no subject of the hub's layout (a key is one
//     token), so nothing there is denied.
//
// A deny is then dropped when every event it holds is granted anyway: when
// the policy allows every topic whose keyed events it holds, or when
// another entry's allow covers it whole and that entry keeps all its own
// denies (which take care of what it must not reach).
func permissions(p *acl.CompiledPolicy, action acl.Action, entries []string) (allow, denyList []string, err error) {
	read := action == acl.ActionSubscribe
	var allows []allowEntry
	var denies []deny
	for owner, subj := range entries {
		toks := strings.Split(subj, ".")
		n := len(toks)
		allows = append(allows, allowEntry{subj, owner})
		switch last := toks[n-1]; last {
		case ">":
			if n > 1 {
				prefix := strings.Join(toks[:n-1], ".")
				denies = append(denies, deny{subject: prefix + "._k.*", owner: owner, keyedOf: prefix})
			}
		case "*":
			if !read {
				allows = append(allows, allowEntry{subj + "._k.*", owner})
				break
			}
			if n == 1 {
				return nil, nil, notExpressible("a bare %q cannot be read without the clients' own inboxes", subj)
			}
			denies = append(denies, deny{subject: subj + ".*", owner: owner}, deny{subject: subj + ".*.>", owner: owner})
		default:
			allows = append(allows, allowEntry{subj + "._k.*", owner})
			if read {
				denies = append(denies, deny{subject: subj + "._k.*.>", owner: owner})
			}
		}
		// "*" one but last, matching the key marker.
		if n >= 2 && toks[n-2] == "*" {
			prefix := strings.Join(toks[:n-2], ".")
			if prefix != "" {
				key := toks[n-1]
				if key == ">" {
					key = "*"
				}
				denies = append(denies, deny{subject: prefix + "." + keyMarker + "." + key, owner: owner, keyedOf: prefix})
			}
		}
	}
	// Pass 1: denies of keyed events of topics the policy grants anyway.
	kept := denies[:0]
	for _, d := range denies {
		if d.keyedOf != "" && p.AllowedAll(action, d.keyedOf, "") {
			continue
		}
		kept = append(kept, d)
	}
	denies = kept
	// Pass 2: denies another entry covers whole, if that entry keeps its
	// own denies. A deny made for several entries is dropped only for all
	// of them.
	owners := map[string][]int{}
	var order []string
	for _, d := range denies {
		if owners[d.subject] == nil {
			order = append(order, d.subject)
		}
		owners[d.subject] = append(owners[d.subject], d.owner)
	}
	touched := map[int]bool{} // entries with a deny dropped
	witness := map[int]bool{} // entries whose cover dropped a deny
	for _, d := range order {
		os := owners[d]
		if slices.ContainsFunc(os, func(o int) bool { return witness[o] }) {
			denyList = append(denyList, d)
			continue
		}
		// Prefer a cover ending in ">": its own denies hold only keyed
		// events, so it rarely needs another entry to cover them.
		i := -1
		for j, a := range allows {
			if slices.Contains(os, a.owner) || touched[a.owner] || !server.SubjectMatchesFilter(d, a.subject) {
				continue
			}
			if i < 0 || (strings.HasSuffix(a.subject, ">") && !strings.HasSuffix(allows[i].subject, ">")) {
				i = j
			}
		}
		if i < 0 {
			denyList = append(denyList, d)
			continue
		}
		witness[allows[i].owner] = true
		for _, o := range os {
			touched[o] = true
		}
	}
	for _, a := range allows {
		if !slices.Contains(allow, a.subject) {
			allow = append(allow, a.subject)
		}
	}
	if allow == nil {
		allow = []string{}
	}
	return allow, denyList, nil
}

// narrowImports drops subjects another entry covers and sorts the rest;
// two entries that overlap without one covering the other would bring a
// message in twice, and an entry beginning with a wildcard would import the
// hub account's own inboxes and JetStream API.
func narrowImports(entries []string) ([]string, error) {
	var subjects, wild []string
	seen := map[string]bool{}
	for _, s := range entries {
		if LeadingWildcard(s) {
			return nil, notExpressible("%q begins with a wildcard", s)
		}
		// Acks in the v2 form ($JS.ACK.<domain>.<hash>.<stream>…) are not
		// what this server sends, and the form could overlap the v1 one.
		if strings.HasPrefix(s, "$JS.ACK.*.*.") || seen[s] {
			continue
		}
		seen[s] = true
		subjects = append(subjects, s)
		if strings.ContainsAny(s, "*>") {
			wild = append(wild, s)
		}
	}
	var out []string
	for _, s := range subjects {
		covered := false
		for _, o := range wild {
			if o == s || !server.SubjectsCollide(s, o) {
				continue
			}
			if server.SubjectMatchesFilter(s, o) {
				covered = true
				break
			}
			if !server.SubjectMatchesFilter(o, s) {
				return nil, notExpressible("%q and %q overlap", s, o)
			}
		}
		if !covered {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out, nil
}
