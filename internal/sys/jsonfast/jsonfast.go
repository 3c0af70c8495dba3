// Package jsonfast writes JSON of a fixed shape byte for byte as
// encoding/json writes it, without reflection, for the hot path of a
// short-lived process (its tests compare every function with
// encoding/json).
package jsonfast

import (
	"unicode/utf8"
)

// The hot path of a mutation writes a few small JSON objects of fixed
// shape (a guard's holder, a fence mark, a record's strings). A
// short-lived process pays for encoding/json's reflection on the first
// value of each type it encodes, so those are written here, byte for byte
// as encoding/json writes them: the tests in jsonfast_test.go compare the
// two, and docs/FAST-PATHS.md says what it saves a call.

// AppendString appends s as encoding/json encodes a string: with
// escapeHTML as json.Marshal does (<, > and & as \u003c, \u003e, \u0026),
// without as an Encoder with SetEscapeHTML(false) does.
func AppendString(dst []byte, s string, escapeHTML bool) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && (!escapeHTML || (b != '<' && b != '>' && b != '&')) {
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
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
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
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
