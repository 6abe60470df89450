package facade

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits on names.
const (
	MaxTopicLen    = 255
	MaxTopicTokens = 16
	MaxSegmentLen  = 64
	MaxGroupLen    = 128
	MaxKeyLen      = 1024
)

// DeadLetterSuffix is appended to a topic to name its dead-letter topic.
const DeadLetterSuffix = "dlq"

// DeadLetterTopic returns the topic that events of topic go to after their
// last failed attempt: topic + ".dlq". The dead-letter event keeps the
// payload, key and envelope of the original and adds the headers
// "dlq_group", "dlq_reason", "dlq_attempts", "dlq_topic" and "dlq_id".
func DeadLetterTopic(topic string) string { return topic + "." + DeadLetterSuffix }

// ValidateTopic returns nil if topic is a valid topic name, or an error
// wrapping [ErrBadTopic] that says what is wrong.
func ValidateTopic(topic string) error { return validateName(topic, false) }

// ValidatePattern returns nil if pattern is a valid topic or a valid
// subscription pattern, or an error wrapping [ErrBadTopic] that says what is
// wrong. A pattern is a topic with wildcard segments: "*" matches exactly
// one segment, "**" one or more (the syntax of package pattern, which
// matches them): "orders.*", "orders.**". Only group subscriptions take
// patterns, and only over a topic family (topics sharing one stream);
// publishes take topics ([ValidateTopic]).
func ValidatePattern(pattern string) error { return validateName(pattern, true) }

// validateName checks a topic, or with wild a subscription pattern.
func validateName(name string, wild bool) error {
	if name == "" {
		return fmt.Errorf("%w: empty topic", ErrBadTopic)
	}
	if len(name) > MaxTopicLen {
		return fmt.Errorf("%w: topic longer than %d bytes", ErrBadTopic, MaxTopicLen)
	}
	n := 0
	for seg := range strings.SplitSeq(name, ".") {
		n++
		switch {
		case !wild:
		case seg == "*" || seg == "**":
			continue
		case seg == ">":
			return fmt.Errorf("%w: %q: \">\" is NATS syntax; use \"**\" (one or more segments)", ErrBadTopic, name)
		case strings.Contains(seg, "*"):
			return fmt.Errorf("%w: %q: '*' must be a whole segment (\"*\" or \"**\")", ErrBadTopic, name)
		}
		if err := validSegment(seg); err != nil {
			return fmt.Errorf("%w: %q: %s", ErrBadTopic, name, err.Error())
		}
	}
	if n > MaxTopicTokens {
		return fmt.Errorf("%w: %q has more than %d segments", ErrBadTopic, name, MaxTopicTokens)
	}
	return nil
}

type segErr string

func (e segErr) Error() string { return string(e) }

func validSegment(seg string) error {
	if seg == "" {
		return segErr("empty segment (leading, trailing or double dot)")
	}
	if len(seg) > MaxSegmentLen {
		return segErr(fmt.Sprintf("segment longer than %d bytes", MaxSegmentLen))
	}
	if seg[0] == '_' {
		return segErr("segments starting with '_' are reserved")
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == ':':
		default:
			const allowed = "(ASCII letters, digits, '_', '-', ':')"
			r, size := utf8.DecodeRuneInString(seg[i:])
			if r == utf8.RuneError && size <= 1 {
				return segErr(fmt.Sprintf("byte 0x%02x (not UTF-8) not allowed %s", c, allowed))
			}
			return segErr(fmt.Sprintf("character %q not allowed %s", r, allowed))
		}
	}
	return nil
}

// ValidateGroup returns nil if group is a valid group name: 1 to 128 printable
// characters without whitespace. Errors wrap [ErrBadGroup].
func ValidateGroup(group string) error {
	if group == "" {
		return fmt.Errorf("%w: empty group", ErrBadGroup)
	}
	if len(group) > MaxGroupLen {
		return fmt.Errorf("%w: group longer than %d bytes", ErrBadGroup, MaxGroupLen)
	}
	if !utf8.ValidString(group) {
		return fmt.Errorf("%w: group is not valid UTF-8", ErrBadGroup)
	}
	for _, r := range group {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("%w: group %q contains whitespace or control characters", ErrBadGroup, group)
		}
	}
	return nil
}

// ValidateKey returns nil if key is usable as an event key: valid UTF-8, at most
// MaxKeyLen bytes. The empty key means "no key". Errors wrap [ErrBadKey].
func ValidateKey(key string) error {
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key longer than %d bytes", ErrBadKey, MaxKeyLen)
	}
	if !utf8.ValidString(key) {
		return fmt.Errorf("%w: key is not valid UTF-8", ErrBadKey)
	}
	return nil
}
