package ops

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/eventhub/eventhub/facade"
)

// PositionKind says how a [Position] names a place in a topic.
type PositionKind int

// Kinds of positions.
const (
	// PosNone: no position (the start of the topic for From, its end as of
	// the request for To).
	PosNone PositionKind = iota
	// PosSeq: a stream sequence.
	PosSeq
	// PosTime: a stored time (the server's clock when it stored the event).
	PosTime
	// PosID: an event id, resolved as afterId is (uuidv7 time window).
	PosID
	// PosEarliest: the beginning of the topic ("earliest", as in a
	// subscription's from). As From it is the same as PosNone; as To the
	// range ends before the first event, so it is empty.
	PosEarliest
	// PosLatest: the end of the topic as of the request ("latest"). As To
	// it is the same as PosNone; as From the range starts after the last
	// event, so it is empty, as a subscription from latest sees nothing
	// already stored.
	PosLatest
)

// Position is one end of a replay range.
type Position struct {
	Kind PositionKind
	Seq  uint64
	Time time.Time
	ID   string
}

// maxFilterLen bounds the correlationId and tag filters of a [Query].
const maxFilterLen = 1024

// maxBareSeq is the largest sequence accepted without the "seq:" prefix:
// larger bare numbers look like epoch milliseconds, which must be written
// "ts:<ms>".
const maxBareSeq = 1_000_000_000_000 - 1

// ParsePosition parses a replay position:
//
//	seq:<n>           stream sequence n (n >= 1)
//	<n>               the same, for n < 10^12 (larger numbers look like
//	                  epoch ms and are refused: write ts:<ms>)
//	ts:<RFC 3339>     a time, e.g. ts:2026-11-22T10:00:00Z (fractional
//	                  seconds and offsets allowed)
//	ts:<ms>           a time in epoch milliseconds
//	<RFC 3339>        the same as ts:<RFC 3339>
//	id:<event id>     an event id
//	<uuid>            the same as id:<uuid>
//	earliest          the beginning of the topic
//	latest            its end as of the request
//
// The empty string is PosNone. A '+' of a time offset that arrived as a
// space (an unescaped '+' in a query string) is accepted. Errors wrap
// [ErrBadRequest].
func ParsePosition(s string) (Position, error) {
	switch s {
	case "":
		return Position{}, nil
	case facade.FromEarliest:
		return Position{Kind: PosEarliest}, nil
	case facade.FromLatest:
		return Position{Kind: PosLatest}, nil
	}
	prefix, rest, hasPrefix := strings.Cut(s, ":")
	if hasPrefix {
		switch prefix {
		case "seq":
			n, err := parseSeq(rest)
			if err != nil {
				return Position{}, badPos(s, err.Error())
			}
			return Position{Kind: PosSeq, Seq: n}, nil
		case "ts":
			if isDigits(rest) {
				ms, err := strconv.ParseInt(rest, 10, 64)
				if err != nil || ms > 1<<53 {
					return Position{}, badPos(s, "epoch milliseconds out of range")
				}
				return Position{Kind: PosTime, Time: time.UnixMilli(ms)}, nil
			}
			t, err := parseTime(rest)
			if err != nil {
				return Position{}, badPos(s, "want ts:<RFC 3339 time> or ts:<epoch ms>")
			}
			return Position{Kind: PosTime, Time: t}, nil
		case "id":
			if rest == "" || len(rest) > 128 || strings.ContainsFunc(rest, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
				return Position{}, badPos(s, "want id:<event id>")
			}
			return Position{Kind: PosID, ID: rest}, nil
		}
	}
	if isDigits(s) {
		n, err := parseSeq(s)
		if err != nil {
			return Position{}, badPos(s, err.Error())
		}
		if n > maxBareSeq {
			return Position{}, badPos(s, "a number this large looks like epoch milliseconds: write ts:"+s+" for a time or seq:"+s+" for a sequence")
		}
		return Position{Kind: PosSeq, Seq: n}, nil
	}
	if t, err := parseTime(s); err == nil {
		return Position{Kind: PosTime, Time: t}, nil
	}
	if _, err := uuid.Parse(s); err == nil && len(s) == 36 {
		return Position{Kind: PosID, ID: s}, nil
	}
	return Position{}, badPos(s, "want earliest, latest, seq:<n>, ts:<RFC 3339 or epoch ms>, id:<event id>, or a bare sequence, time or uuid")
}

func badPos(s, why string) error {
	return fmt.Errorf("%w: position %q: %s", ErrBadRequest, s, why)
}

func parseSeq(s string) (uint64, error) {
	if !isDigits(s) {
		return 0, fmt.Errorf("want a sequence number")
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("sequence out of range")
	}
	if n == 0 {
		return 0, fmt.Errorf("sequences start at 1")
	}
	return n, nil
}

func parseTime(s string) (time.Time, error) {
	s = strings.ReplaceAll(s, " ", "+")
	return time.Parse(time.RFC3339Nano, s)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// String formats p in the syntax of [ParsePosition] (with its prefix), so
// that ParsePosition(p.String()) gives p back; "" for PosNone.
func (p Position) String() string {
	switch p.Kind {
	case PosSeq:
		return "seq:" + strconv.FormatUint(p.Seq, 10)
	case PosTime:
		return "ts:" + p.Time.UTC().Format(time.RFC3339Nano)
	case PosID:
		return "id:" + p.ID
	case PosEarliest:
		return facade.FromEarliest
	case PosLatest:
		return facade.FromLatest
	}
	return ""
}

// Query selects the events of a replay or export.
type Query struct {
	// Topic is the topic to read. Required.
	Topic string
	// From is the first position, inclusive (PosNone: the topic's first
	// event).
	From Position
	// To is the last position: inclusive for a sequence or an id, exclusive
	// for a time (events stored before it), so consecutive time windows
	// neither overlap nor miss an event. PosNone: the stream's last event
	// as of the start of the replay. A replay never goes past that event.
	To Position
	// Limit stops after this many events (0: no limit). With filters it
	// counts the events that match.
	Limit int64
	// Key, when not empty, keeps only the events with this key. The key is
	// part of the subject, so JetStream filters by it: only the key's own
	// messages are read.
	Key string
	// CorrelationID, when not empty, keeps only the events whose header
	// "correlationId" ([HeaderCorrelationID]), its name in any case, is
	// this value. There is no index of headers: every event of the range
	// is read and tested.
	CorrelationID string
	// Tag, when not empty, keeps only the events that carry this tag. Like
	// CorrelationID, it is tested on every event of the range.
	Tag string
}

// HeaderCorrelationID is the event header that [Query.CorrelationID]
// filters on. Its name is matched ignoring case, since HTTP publishes store
// header names lower-cased ("correlationid"); its value is matched exactly.
const HeaderCorrelationID = "correlationId"

// filtered reports whether q has filters that are tested on each event
// (rather than by the consumer's subject).
func (q Query) filtered() bool { return q.CorrelationID != "" || q.Tag != "" }

// hasCorrelationID reports whether headers has a correlationId header, its
// name in any case, whose value is id.
func hasCorrelationID(headers map[string]string, id string) bool {
	for name, v := range headers {
		if v == id && strings.EqualFold(name, HeaderCorrelationID) {
			return true
		}
	}
	return false
}

// match reports whether e passes q's per-event filters.
func (q Query) match(e *facade.EventRecord) bool {
	if q.CorrelationID != "" && !hasCorrelationID(e.Headers, q.CorrelationID) {
		return false
	}
	if q.Tag != "" && !slices.Contains(e.Tags, q.Tag) {
		return false
	}
	return true
}

// ParseQuery reads a Query from URL query parameters topic, from, to,
// limit, key, correlationId and tag. Errors wrap [ErrBadRequest],
// [facade.ErrBadTopic] or [facade.ErrBadKey].
func ParseQuery(v url.Values) (Query, error) {
	var q Query
	q.Topic = v.Get("topic")
	if q.Topic == "" {
		return q, fmt.Errorf("%w: query parameter %q is required", ErrBadRequest, "topic")
	}
	if err := facade.ValidateTopic(q.Topic); err != nil {
		return q, err
	}
	var err error
	if q.From, err = ParsePosition(v.Get("from")); err != nil {
		return q, fmt.Errorf("from: %w", err)
	}
	if q.To, err = ParsePosition(v.Get("to")); err != nil {
		return q, fmt.Errorf("to: %w", err)
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return q, fmt.Errorf("%w: limit %q: want a number >= 0", ErrBadRequest, s)
		}
		q.Limit = n
	}
	if v.Has("key") {
		q.Key = v.Get("key")
		if q.Key == "" {
			return q, fmt.Errorf("%w: key: empty (omit it for every key)", ErrBadRequest)
		}
		if err := facade.ValidateKey(q.Key); err != nil {
			return q, err
		}
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"correlationId", &q.CorrelationID}, {"tag", &q.Tag}} {
		if !v.Has(f.name) {
			continue
		}
		s := v.Get(f.name)
		if s == "" || len(s) > maxFilterLen {
			return q, fmt.Errorf("%w: %s: want 1 to %d bytes", ErrBadRequest, f.name, maxFilterLen)
		}
		*f.dst = s
	}
	return q, nil
}
