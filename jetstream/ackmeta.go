package jetstream

import (
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ackMeta reads a delivery's metadata from its reply subject into m, as
// [jetstream.Msg.Metadata] does (both layouts of the ack subject: without
// and with domain and account hash), without allocating: it runs once per
// delivery. False when reply is not an ack subject.
func ackMeta(reply string, m *jetstream.MsgMetadata) bool {
	const prefix = "$JS.ACK."
	if !strings.HasPrefix(reply, prefix) {
		return false
	}
	rest := reply[len(prefix):]
	// Tokens after the prefix: 7 (stream, consumer, delivered, stream
	// sequence, consumer sequence, time, pending), or 9 and more (domain
	// and account hash first, anything after pending ignored).
	var tok [9]string
	n := strings.Count(rest, ".") + 1
	switch {
	case n == 7:
		for i := 2; i < len(tok); i++ {
			tok[i], rest, _ = strings.Cut(rest, ".")
		}
	case n >= 9:
		for i := range tok {
			tok[i], rest, _ = strings.Cut(rest, ".")
		}
	default:
		return false
	}
	*m = jetstream.MsgMetadata{
		Domain:       tok[0],
		Stream:       tok[2],
		Consumer:     tok[3],
		NumDelivered: parseNum(tok[4]),
		Timestamp:    time.Unix(0, int64(parseNum(tok[7]))),
		NumPending:   parseNum(tok[8]),
	}
	if m.Domain == "_" {
		m.Domain = ""
	}
	m.Sequence.Stream = parseNum(tok[5])
	m.Sequence.Consumer = parseNum(tok[6])
	return true
}

// parseNum reads a decimal token of an ack subject; 0 when it is not one
// (as nats.go reads them).
func parseNum(d string) uint64 {
	var n uint64
	for i := 0; i < len(d); i++ {
		c := d[i]
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}
