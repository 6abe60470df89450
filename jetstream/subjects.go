package jetstream

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// Subject layout (see docs/design.md):
//
//	<topic>                  an event without a key
//	<topic>._k.<key-token>   an event with a key
//
// Topic segments may not start with '_', so "._k." can only be the key marker
// and a topic never collides with the keyed subjects of its parent: the
// subjects of "process.state" ("process.state", "process.state._k.*") and of
// "process.state.snapshot" do not overlap.
const keyMarker = "_k"

// keyedPrefix returns the subject prefix of the keyed events of topic.
func keyedPrefix(topic string) string { return topic + "." + keyMarker + "." }

// keyedWildcard returns the subject filter of all keyed events of topic.
func keyedWildcard(topic string) string { return keyedPrefix(topic) + "*" }

// subjectFor returns the subject an event of topic with key is published on.
func subjectFor(topic, key string) string {
	if key == "" {
		return topic
	}
	return keyedPrefix(topic) + EncodeKey(key)
}

// splitSubject returns the topic and key of a subject in the layout. A subject
// outside the layout (an operator-made stream's) is its own topic.
func splitSubject(subject string) (topic, key string) {
	i := strings.Index(subject, "."+keyMarker+".")
	if i < 0 {
		return subject, ""
	}
	tok := subject[i+len(keyMarker)+2:]
	k, err := DecodeKey(tok)
	if err != nil || strings.Contains(tok, ".") {
		return subject, ""
	}
	return subject[:i], k
}

// EncodeKey turns an event key into one subject token. Bytes that are printable
// ASCII other than '.', '*', '>' and '%' stay as they are, so keys such as
// "host:name:1234" stay readable; every other byte becomes %XX, upper-case
// hex, as in URLs. The empty key is not encoded (an event without a key has no
// key token). The encoding is reversible with [DecodeKey].
func EncodeKey(key string) string {
	n := 0
	for i := 0; i < len(key); i++ {
		if !plainKeyByte(key[i]) {
			n++
		}
	}
	if n == 0 {
		return key
	}
	const hexdig = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(key) + 2*n)
	for i := 0; i < len(key); i++ {
		c := key[i]
		if plainKeyByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexdig[c>>4])
		b.WriteByte(hexdig[c&15])
	}
	return b.String()
}

func plainKeyByte(c byte) bool {
	return c > ' ' && c < 0x7f && c != '.' && c != '*' && c != '>' && c != '%'
}

// DecodeKey reverses [EncodeKey].
func DecodeKey(tok string) (string, error) {
	if !strings.Contains(tok, "%") {
		return tok, nil
	}
	var b strings.Builder
	b.Grow(len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(tok) {
			return "", fmt.Errorf("truncated escape in key token %q", tok)
		}
		v, err := hex.DecodeString(tok[i+1 : i+3])
		if err != nil {
			return "", fmt.Errorf("bad escape in key token %q", tok)
		}
		b.WriteByte(v[0])
		i += 2
	}
	return b.String(), nil
}

// streamNameFor derives the name of the stream the hub creates for topic:
// "EH_" + the topic with '.' and ':' replaced by '_' + a hash of the topic, so
// that different topics never share a name.
func streamNameFor(topic string) string { return streamPrefix + safeName(topic) }

// streamPrefix begins the name of every stream the bus creates.
const streamPrefix = "EH_"

// consumerNameFor derives a durable consumer name from a group name (and the
// topic, when the stream holds several topics).
func consumerNameFor(group, topic string, sharedStream bool) string {
	if !sharedStream && validName(group) {
		return group
	}
	if sharedStream {
		return safeName(group + "@" + topic)
	}
	return safeName(group)
}

// validName reports whether s can be used as a stream or consumer name as it is.
func validName(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// safeName maps s to a valid name: invalid bytes become '_', the result is cut
// to 180 bytes and an 8-byte hash of s is appended, so distinct inputs give
// distinct names.
func safeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < 180; i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	sum := sha256.Sum256([]byte(s))
	b.WriteByte('_')
	b.WriteString(hex.EncodeToString(sum[:4]))
	return b.String()
}

func timeMs(ms int64) time.Time { return time.UnixMilli(ms) }
