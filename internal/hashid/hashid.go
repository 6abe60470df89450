// Package hashid derives event ids and duplicate keys from other data, so
// that the same input always gives the same result and a repeated publish is
// deduplicated by the stream's duplicate window. One derivation for each:
// the Nats-Msg-Id of dead letters and redriven dead letters (V8), the ids of
// compaction snapshots (V7), of events stored without one (V7Seq) and of
// events stored with a time but no id (V7Pos).
package hashid

import (
	"crypto/sha256"
	"encoding/binary"
	"strings"

	"github.com/google/uuid"
)

// V8 returns a UUID version 8 (RFC 9562 variant) made of the first bytes of
// the SHA-256 of parts joined by NUL. It is a pure function. It is not a
// position (it has no time): use it as a duplicate key, never as an event id.
func V8(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	var u uuid.UUID
	copy(u[:], sum[:16])
	u[6] = u[6]&0x0f | 0x80
	u[8] = u[8]&0x3f | 0x80
	return u.String()
}

// V7 returns a uuidv7 whose timestamp is ms (Unix milliseconds) and whose
// random bits are the SHA-256 of parts joined by NUL, so afterId positions
// work on it. It is a pure function.
func V7(ms int64, parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	var rest [10]byte
	copy(rest[:], sum[:10])
	return v7(ms, rest)
}

// V7Seq returns a uuidv7 whose timestamp is ms, whose 12-bit rand_a field is
// marker and whose 62-bit rand_b field is seq; [SeqOfV7] reads seq back when
// the marker matches. It is a pure function.
func V7Seq(ms int64, marker uint16, seq uint64) string {
	var rest [10]byte
	rest[0] = byte(marker >> 8 & 0x0f)
	rest[1] = byte(marker)
	binary.BigEndian.PutUint64(rest[2:], seq&(1<<62-1))
	return v7(ms, rest)
}

// SeqOfV7 returns the sequence of an id made by [V7Seq] with marker, and
// false when id is not one (or its sequence is 0).
func SeqOfV7(id string, marker uint16) (uint64, bool) {
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 || (uint16(u[6]&0x0f)<<8|uint16(u[7])) != marker {
		return 0, false
	}
	v := binary.BigEndian.Uint64(u[8:]) & (1<<62 - 1)
	return v, v > 0
}

// V7Pos returns a uuidv7 whose timestamp is ms, whose 12-bit rand_a field
// is marker (4 bits) followed by the top 8 bits of tag (30 bits), and whose
// 62-bit rand_b field is the other 22 bits of tag followed by the low 40
// bits of seq; [PosOfV7] reads tag and those bits of seq back when the
// marker matches. It is a pure function.
func V7Pos(ms int64, marker uint8, tag uint32, seq uint64) string {
	var rest [10]byte
	rest[0] = marker & 0x0f
	rest[1] = byte(tag >> 22)
	binary.BigEndian.PutUint64(rest[2:], uint64(tag&(1<<22-1))<<40|seq&(1<<40-1))
	return v7(ms, rest)
}

// PosOfV7 returns the tag and the low 40 bits of the sequence of an id
// made by [V7Pos] with marker, and false when id is not one.
func PosOfV7(id string, marker uint8) (tag uint32, seq uint64, ok bool) {
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 || u[6]&0x0f != marker&0x0f {
		return 0, 0, false
	}
	v := binary.BigEndian.Uint64(u[8:]) & (1<<62 - 1)
	return uint32(u[7])<<22 | uint32(v>>40), v & (1<<40 - 1), true
}

// Tag30 returns a 30-bit FNV-1a hash of s, the tag [V7Pos] takes.
func Tag30(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h & (1<<30 - 1)
}

// v7 lays out a uuidv7: 48-bit ms timestamp, then rest with the version
// and variant bits set.
func v7(ms int64, rest [10]byte) string {
	var u uuid.UUID
	var tsb [8]byte
	binary.BigEndian.PutUint64(tsb[:], uint64(ms))
	copy(u[:6], tsb[2:])
	copy(u[6:], rest[:])
	u[6] = 0x70 | u[6]&0x0f // version 7
	u[8] = 0x80 | u[8]&0x3f // RFC 9562 variant
	return u.String()
}
