package wire

import "unicode/utf8"

// scanValue returns the end of the JSON value that starts at data[i] (no
// whitespace before it), checking it as encoding/json and the frame's UTF-8
// check would: the grammar of RFC 8259 and valid UTF-8 in strings. It is
// how the EVENT fast path finds and checks a payload in one pass. false:
// not a valid value, or one nested deeper than 64 levels (the general
// decoder then decides).
func scanValue(data []byte, i int) (int, bool) {
	var (
		stack uint64 // bit d set: the container at depth d+1 is an object
		depth int
	)
	for {
		// A value at data[i].
		if i >= len(data) {
			return 0, false
		}
		var ok bool
		switch c := data[i]; {
		case c == '{' || c == '[':
			if depth == 64 {
				return 0, false
			}
			obj := c == '{'
			if obj {
				stack |= 1 << depth
			} else {
				stack &^= 1 << depth
			}
			depth++
			i = skipSpace(data, i+1)
			if i < len(data) && data[i] == c+2 { // '}' or ']'
				depth--
				i++
				break
			}
			if obj {
				if i, ok = scanKey(data, i); !ok {
					return 0, false
				}
			}
			continue
		case c == '"':
			if i, ok = scanString(data, i); !ok {
				return 0, false
			}
		case c == '-' || (c >= '0' && c <= '9'):
			if i, ok = scanNumber(data, i); !ok {
				return 0, false
			}
		case c == 't':
			if i, ok = expect(data, i, "true"); !ok {
				return 0, false
			}
		case c == 'f':
			if i, ok = expect(data, i, "false"); !ok {
				return 0, false
			}
		case c == 'n':
			if i, ok = expect(data, i, "null"); !ok {
				return 0, false
			}
		default:
			return 0, false
		}
		// After a value: close containers, or move to the next element.
		for {
			if depth == 0 {
				return i, true
			}
			i = skipSpace(data, i)
			if i >= len(data) {
				return 0, false
			}
			obj := stack&(1<<(depth-1)) != 0
			c := data[i]
			if c == ',' {
				i = skipSpace(data, i+1)
				if obj {
					if i, ok = scanKey(data, i); !ok {
						return 0, false
					}
				}
				break
			}
			if (obj && c == '}') || (!obj && c == ']') {
				depth--
				i++
				continue
			}
			return 0, false
		}
	}
}

// scanKey checks `"key" :` at data[i] and returns the index of the value
// after it.
func scanKey(data []byte, i int) (int, bool) {
	if i >= len(data) || data[i] != '"' {
		return 0, false
	}
	i, ok := scanString(data, i)
	if !ok {
		return 0, false
	}
	i = skipSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		return 0, false
	}
	return skipSpace(data, i+1), true
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanString checks the string starting at data[i] (a '"') and returns the
// index after it.
func scanString(data []byte, i int) (int, bool) {
	for i++; i < len(data); {
		for i < len(data) && plainByte[data[i]] {
			i++
		}
		if i == len(data) {
			break
		}
		c := data[i]
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(data) {
				return 0, false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) {
					return 0, false
				}
				for _, h := range data[i+2 : i+6] {
					if !isHex(h) {
						return 0, false
					}
				}
				i += 6
			default:
				return 0, false
			}
		case c < 0x20:
			return 0, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n == 1 {
				return 0, false
			}
			i += n
		}
	}
	return 0, false
}

// plainByte marks the bytes a string holds as they are: ASCII but for
// control characters, '"' and '\\'. Read only.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// scanNumber checks the number starting at data[i] and returns the index
// after it.
func scanNumber(data []byte, i int) (int, bool) {
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		i = digits(data, i)
	default:
		return 0, false
	}
	if i < len(data) && data[i] == '.' {
		j := digits(data, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := digits(data, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func digits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}
