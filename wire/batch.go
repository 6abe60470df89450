package wire

import "bytes"

// Batched frames. A connection whose AUTH carried "batch":true may receive
// several frames in one WebSocket text message, and may send several: a
// JSON array of frame objects, [{"op":"EVENT",…},{"op":"EVENT",…}], in the
// order the frames would have been sent one by one. A message holding one
// frame is sent bare, as without batching.

// Bounds of one batched message as the gateway and the Go client write
// it: frames are added while the message stays within BatchMaxBytes (a
// larger frame goes alone) and BatchMaxFrames.
const (
	BatchMaxBytes  = 64 << 10
	BatchMaxFrames = 256
)

// IsBatch reports whether the message data is a batch: a JSON array,
// possibly after whitespace.
func IsBatch(data []byte) bool {
	i := skipSpace(data, 0)
	return i < len(data) && data[i] == '['
}

// SplitBatch calls fn with each frame of the batch data, in order, until fn
// returns false. The frames alias data. A batch is a non-empty JSON array
// of objects, whitespace allowed between its tokens. SplitBatch only finds
// where each object ends (its brackets balanced outside strings); the
// frame's content is checked by [Decode], so the frames are read once.
// Errors are *facade.Error with code bad_json (not an array, an object
// not closed) or bad_frame (an empty array, an element that is not an
// object); frames before the error have been passed to fn.
func SplitBatch(data []byte, fn func(frame []byte) bool) error {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return Errorf(CodeBadJSON, "a batch is a JSON array of frames")
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		if skipSpace(data, i+1) != len(data) {
			return Errorf(CodeBadJSON, "data after the batch's array")
		}
		return Errorf(CodeBadFrame, "empty batch")
	}
	for n := 0; ; n++ {
		if i >= len(data) {
			return Errorf(CodeBadJSON, "batch: unexpected end of JSON input")
		}
		if data[i] != '{' {
			if _, ok := scanValue(data, i); !ok {
				return Errorf(CodeBadJSON, "batch: frame %d is not valid JSON", n)
			}
			return Errorf(CodeBadFrame, "batch: frame %d is not a JSON object", n)
		}
		end, ok := skipObject(data, i)
		if !ok {
			return Errorf(CodeBadJSON, "batch: frame %d is not closed", n)
		}
		if !fn(data[i:end]) {
			return nil
		}
		i = skipSpace(data, end)
		if i >= len(data) {
			return Errorf(CodeBadJSON, "batch: unexpected end of JSON input")
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			if skipSpace(data, i+1) != len(data) {
				return Errorf(CodeBadJSON, "data after the batch's array")
			}
			return nil
		default:
			return Errorf(CodeBadJSON, "batch: want , or ] after frame %d", n)
		}
	}
}

// skipObject returns the end of the object starting at data[i] (a '{'): the
// index after the bracket that closes it, counting brackets outside strings
// only. It does not check the object's content.
func skipObject(data []byte, i int) (int, bool) {
	depth := 0
	for ; i < len(data); i++ {
		switch data[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		case '"':
			// The closing quote: the next one after an even number of
			// backslashes.
			for {
				j := bytes.IndexByte(data[i+1:], '"')
				if j < 0 {
					return 0, false
				}
				i += 1 + j
				k := i - 1
				for data[k] == '\\' {
					k--
				}
				if (i-1-k)%2 == 0 {
					break
				}
			}
		}
	}
	return 0, false
}
