package jetstream

import (
	"encoding/binary"
	"encoding/hex"
	"time"

	"github.com/google/uuid"
)

// Events stored without a Nats-Msg-Id (published by a plain NATS client) get a
// stable id derived from where they are stored: a uuidv7 whose timestamp is the
// stored time and whose 12-bit rand_a field is synthMarker, with the stream
// sequence in the 62-bit rand_b field. The same message always gets the same
// id, and the id leads straight back to its sequence.
const synthMarker = 0xE4B

func synthID(stored time.Time, seq uint64) string {
	var u uuid.UUID
	ms := uint64(stored.UnixMilli())
	u[0] = byte(ms >> 40)
	u[1] = byte(ms >> 32)
	u[2] = byte(ms >> 24)
	u[3] = byte(ms >> 16)
	u[4] = byte(ms >> 8)
	u[5] = byte(ms)
	u[6] = 0x70 | byte(synthMarker>>8)
	u[7] = byte(synthMarker & 0xff)
	binary.BigEndian.PutUint64(u[8:], seq&(1<<62-1))
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	var buf [36]byte
	encodeUUID(buf[:], u)
	return string(buf[:])
}

// synthSeq returns the sequence a synthesised id points at.
func synthSeq(id string) (uint64, bool) {
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 || (uint16(u[6]&0x0f)<<8|uint16(u[7])) != synthMarker {
		return 0, false
	}
	v := binary.BigEndian.Uint64(u[8:]) & (1<<62 - 1)
	return v, v > 0
}

func encodeUUID(dst []byte, u uuid.UUID) {
	hex.Encode(dst, u[:4])
	dst[8] = '-'
	hex.Encode(dst[9:13], u[4:6])
	dst[13] = '-'
	hex.Encode(dst[14:18], u[6:8])
	dst[18] = '-'
	hex.Encode(dst[19:23], u[8:10])
	dst[23] = '-'
	hex.Encode(dst[24:], u[10:])
}
