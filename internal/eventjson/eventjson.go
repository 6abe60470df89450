// Package eventjson writes JSON of events without reflection and without
// re-encoding payloads: what the WebSocket gateway sends in EVENT frames and
// what replay streams as NDJSON. Its output equals json.Marshal's.
package eventjson

import (
	"strconv"
	"unicode/utf8"

	"github.com/eventhub/eventhub/facade"
)

// Append appends the JSON of e exactly as json.Marshal writes it, without
// re-encoding the payload: its stored bytes are compacted and HTML-escaped
// in one pass (they were validated when published).
func Append(dst []byte, e *facade.EventRecord) []byte {
	if e == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, `{"id":`...)
	dst = AppendString(dst, e.ID)
	if e.SID != "" {
		dst = append(dst, `,"sid":`...)
		dst = AppendString(dst, e.SID)
	}
	dst = append(dst, `,"ts":`...)
	dst = strconv.AppendInt(dst, e.TS, 10)
	dst = append(dst, `,"topic":`...)
	dst = AppendString(dst, e.Topic)
	if e.Key != "" {
		dst = append(dst, `,"key":`...)
		dst = AppendString(dst, e.Key)
	}
	if e.Partition != nil {
		dst = append(dst, `,"partition":`...)
		dst = strconv.AppendInt(dst, int64(*e.Partition), 10)
	}
	if len(e.Headers) > 0 {
		dst = append(dst, `,"headers":`...)
		dst = AppendStringMap(dst, e.Headers)
	}
	dst = append(dst, `,"payload":`...)
	if e.Payload == nil {
		dst = append(dst, "null"...)
	} else {
		dst = AppendCompact(dst, e.Payload)
	}
	if len(e.CausedBy) > 0 {
		dst = append(dst, `,"caused_by":`...)
		dst = AppendStrings(dst, e.CausedBy)
	}
	if len(e.Tags) > 0 {
		dst = append(dst, `,"tags":`...)
		dst = AppendStrings(dst, e.Tags)
	}
	if e.Seq != 0 {
		dst = append(dst, `,"seq":`...)
		dst = strconv.AppendUint(dst, e.Seq, 10)
	}
	if e.Deleted {
		dst = append(dst, `,"deleted":true`...)
	}
	return append(dst, '}')
}

// AppendStrings appends ss as a JSON array.
func AppendStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, s)
	}
	return append(dst, ']')
}

// AppendStringMap writes m with its keys sorted, as encoding/json does.
func AppendStringMap(dst []byte, m map[string]string) []byte {
	var small [8]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	// Insertion sort: header maps are small.
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, k)
		dst = append(dst, ':')
		dst = AppendString(dst, m[k])
	}
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

// safeASCII[b] is true for the ASCII bytes encoding/json writes as they are
// (with HTML escaping on).
var safeASCII = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		switch b {
		case '"', '\\', '<', '>', '&':
		default:
			t[b] = true
		}
	}
	return t
}()

// AppendString appends s as a JSON string exactly as encoding/json does:
// HTML-safe escapes for <, >, &; \u2028 and \u2029 escaped; invalid UTF-8
// replaced by \ufffd.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if safeASCII[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// compactSkip[b] marks the bytes AppendCompact must look at: whitespace
// (dropped outside strings), quotes and backslashes (string state), the
// HTML characters and the lead byte of U+2028 / U+2029 (escaped).
var compactSkip = func() (t [256]bool) {
	for _, b := range []byte(" \t\r\n\"\\<>&\xe2") {
		t[b] = true
	}
	return t
}()

// AppendCompact appends the valid JSON value src without insignificant
// whitespace and with <, >, &, U+2028, U+2029 escaped: what json.Marshal
// writes for a json.RawMessage, in one pass and without validating (src was
// validated when it was published).
func AppendCompact(dst, src []byte) []byte {
	inString := false
	start := 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		if !compactSkip[c] {
			continue
		}
		switch c {
		case '"':
			inString = !inString
		case '\\':
			i++ // the escaped byte cannot end the string
		case ' ', '\t', '\r', '\n':
			if !inString {
				dst = append(dst, src[start:i]...)
				start = i + 1
			}
		case '<', '>', '&':
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			start = i + 1
		case 0xe2:
			if i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xa8 {
				dst = append(dst, src[start:i]...)
				dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[src[i+2]&0xF])
				i += 2
				start = i + 1
			}
		}
	}
	return append(dst, src[start:]...)
}
