// Package jsonvalid checks that bytes are one valid JSON value, accepting
// exactly what encoding/json.Valid accepts, several times faster: every event
// payload is validated on the way in, so this is on the publish path.
package jsonvalid

import (
	"encoding/binary"
	"math/bits"
)

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// Valid reports whether b is a single valid JSON value, optionally surrounded
// by whitespace. Like encoding/json.Valid it does not check that strings are
// valid UTF-8.
func Valid(b []byte) bool {
	var stackBuf [32]byte
	stack := stackBuf[:0]
	i := skipWS(b, 0)
	for {
		// A value starts at i.
		if i >= len(b) {
			return false
		}
		var ok bool
		switch c := b[i]; c {
		case '{':
			if len(stack) >= maxDepth {
				return false
			}
			stack = append(stack, '{')
			i = skipWS(b, i+1)
			if i < len(b) && b[i] == '}' {
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if i, ok = member(b, i); !ok {
				return false
			}
			continue
		case '[':
			if len(stack) >= maxDepth {
				return false
			}
			stack = append(stack, '[')
			i = skipWS(b, i+1)
			if i < len(b) && b[i] == ']' {
				stack = stack[:len(stack)-1]
				i++
				break
			}
			continue
		case '"':
			if i, ok = str(b, i+1); !ok {
				return false
			}
		case 't':
			if i, ok = lit(b, i, "true"); !ok {
				return false
			}
		case 'f':
			if i, ok = lit(b, i, "false"); !ok {
				return false
			}
		case 'n':
			if i, ok = lit(b, i, "null"); !ok {
				return false
			}
		default:
			if i, ok = num(b, i); !ok {
				return false
			}
		}
		// After a value: close containers or move to the next element.
		for {
			i = skipWS(b, i)
			if len(stack) == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			top := stack[len(stack)-1]
			c := b[i]
			if c == ',' {
				i = skipWS(b, i+1)
				if top == '{' {
					if i, ok = member(b, i); !ok {
						return false
					}
				}
				break
			}
			if (top == '{' && c == '}') || (top == '[' && c == ']') {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			return false
		}
	}
}

// member reads `"key" :` and the whitespace after it.
func member(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	i, ok := str(b, i+1)
	if !ok {
		return i, false
	}
	i = skipWS(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, false
	}
	return skipWS(b, i+1), true
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func lit(b []byte, i int, word string) (int, bool) {
	if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
		return i, false
	}
	return i + len(word), true
}

const (
	lo7  = 0x0101010101010101
	hi7  = 0x8080808080808080
	quot = lo7 * '"'
	bsl  = lo7 * '\\'
)

// str reads the rest of a string whose opening quote is before i.
func str(b []byte, i int) (int, bool) {
	for {
		// Skip 8 bytes at a time while none is '"', '\\' or a control byte.
		for len(b)-i >= 8 {
			w := binary.LittleEndian.Uint64(b[i:])
			m := hasZero(w^quot) | hasZero(w^bsl) | hasLess(w, 0x20)
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) / 8
			break
		}
		if i >= len(b) {
			return i, false
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			i++
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if len(b)-i < 5 || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return i, false
				}
				i += 5
			default:
				return i, false
			}
		case c < 0x20:
			return i, false
		default:
			i++
		}
	}
}

// hasZero marks (with the high bit) the bytes of w that are zero; the lowest
// marked byte is always exact, which is all str needs.
func hasZero(w uint64) uint64 { return (w - lo7) & ^w & hi7 }

// hasLess marks the bytes of w below n (n <= 128); the lowest marked byte is
// exact.
func hasLess(w uint64, n uint64) uint64 { return (w - lo7*n) & ^w & hi7 }

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// num reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func num(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		i = digits(b, i+1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
