package ops

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/eventhub/eventhub/facade"
)

// appendEvent appends the JSON of e, as json.Marshal(e) writes it (same
// fields, order, omissions and string escaping), except that the payload's
// bytes are copied as stored instead of being re-encoded: no HTML escaping
// of '<', '>' and '&' inside the payload, insignificant spaces kept. A
// payload holding a line break (only possible as insignificant whitespace
// in valid JSON) is compacted, so that one event is always one line.
func appendEvent(dst []byte, e *facade.EventRecord) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, e.ID)
	if e.SID != "" {
		dst = append(dst, `,"sid":`...)
		dst = appendString(dst, e.SID)
	}
	dst = append(dst, `,"ts":`...)
	dst = strconv.AppendInt(dst, e.TS, 10)
	dst = append(dst, `,"topic":`...)
	dst = appendString(dst, e.Topic)
	if e.Key != "" {
		dst = append(dst, `,"key":`...)
		dst = appendString(dst, e.Key)
	}
	if e.Partition != nil {
		dst = append(dst, `,"partition":`...)
		dst = strconv.AppendInt(dst, int64(*e.Partition), 10)
	}
	if len(e.Headers) > 0 {
		dst = append(dst, `,"headers":{`...)
		for i, k := range slices.Sorted(maps.Keys(e.Headers)) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = appendString(dst, e.Headers[k])
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `,"payload":`...)
	dst = appendPayload(dst, e.Payload)
	if len(e.CausedBy) > 0 {
		dst = append(dst, `,"caused_by":`...)
		dst = appendStrings(dst, e.CausedBy)
	}
	if len(e.Tags) > 0 {
		dst = append(dst, `,"tags":`...)
		dst = appendStrings(dst, e.Tags)
	}
	if e.Seq != 0 {
		dst = append(dst, `,"seq":`...)
		dst = strconv.AppendUint(dst, e.Seq, 10)
	}
	return append(dst, '}')
}

func appendPayload(dst []byte, p json.RawMessage) []byte {
	if len(p) == 0 {
		return append(dst, "null"...)
	}
	if bytes.IndexByte(p, '\n') < 0 && bytes.IndexByte(p, '\r') < 0 {
		return append(dst, p...)
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, p); err != nil {
		// Not valid JSON (never for stored events, which are decoded
		// into valid JSON): send it as a string rather than break the line.
		return appendString(dst, string(p))
	}
	return buf.Bytes()
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, s)
	}
	return append(dst, ']')
}

// appendString appends s as a JSON string exactly as encoding/json does
// (HTML-safe escaping, invalid UTF-8 as U+FFFD, U+2028 and U+2029
// escaped). Strings of plain ASCII, the usual case, take the fast path.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
