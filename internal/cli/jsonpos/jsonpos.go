// Package jsonpos says where in a JSON text a value or a mistake is: its
// line and column, and the path of the member it is in ($.slots[1].id),
// so that a message about a file points at the place to fix.
package jsonpos

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Position is a place in a text: its line and column, both from 1; the
// column counts characters (UTF-8 sequences), as editors do.
type Position struct {
	Line, Column int
}

// String is "LINE:COLUMN".
func (p Position) String() string { return strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Column) }

// At is the position of byte offset off of data (clamped to data).
func At(data []byte, off int64) Position {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	if i := bytes.LastIndexByte(before, '\n'); i >= 0 {
		before = before[i+1:]
	}
	return Position{Line: line, Column: utf8.RuneCount(before) + 1}
}

// Find returns where the value at path begins in data, or, for a member
// of an object, where its key does (the place a reader looks for it). A
// path is "$" for the whole value, then ".name" for each member and
// "[i]" for each element: $.slots[1].id. ok is false when data has no
// such value (or is not JSON up to it).
func Find(data []byte, path string) (pos Position, ok bool) {
	var at int64 = -1
	_, _ = walk(data, func(p string, off int64) bool {
		if p == path {
			at = off
			return true
		}
		return false
	})
	if at < 0 {
		return Position{}, false
	}
	return At(data, at), true
}

// Mistake is what is wrong with a text that is not one JSON value: the
// decoder's message, where it found it and the path of the value it was
// reading ($ for the top).
type Mistake struct {
	Path string
	Position
	Msg string
}

// Check reads data as exactly one JSON value and reports its first
// mistake (a syntax error, the end of the text before the end of the
// value, something after it), or nil.
func Check(data []byte) *Mistake {
	var raw json.RawMessage
	err := json.Unmarshal(data, &raw)
	var syn *json.SyntaxError
	if err == nil || !errors.As(err, &syn) {
		return nil
	}
	// Unmarshal counts the byte it stopped at: an invalid character is
	// the one before Offset, the end of the text is at it.
	off, msg := syn.Offset, syn.Error()
	if strings.HasPrefix(msg, "invalid character") {
		off--
	}
	switch {
	case off >= int64(len(bytes.TrimRight(data, " \t\r\n"))) && strings.HasPrefix(msg, "unexpected end"):
		msg = "the text ends before the value does"
	case strings.HasSuffix(msg, "after top-level value"):
		msg = "trailing data after the value"
	}
	path, _ := walk(data, func(string, int64) bool { return false })
	return &Mistake{Path: path, Position: At(data, off), Msg: msg}
}

// frame is one open object or array of a walk.
type frame struct {
	object bool
	key    string // the member being read, in an object
	index  int    // the element being read, in an array
	// wantKey is true in an object where a key (or the end) comes next.
	wantKey bool
}

// walk reads data token by token and calls visit with the path and the
// offset of each value, and of each object member's key (with the path of
// its value), until visit returns true or the text ends. It returns the
// path being read and the error of a text that is not one JSON value
// (whose offset [Check] takes from encoding/json's own check).
func walk(data []byte, visit func(path string, off int64) (stop bool)) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []frame
	top := true
	for {
		off := skipSpace(data, dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) && !top && len(stack) == 0 {
				return "$", nil
			}
			return pathOf(stack), err
		}
		if !top && len(stack) == 0 {
			return "$", errors.New("more text after the value")
		}
		top = false
		if len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.object && f.wantKey {
				if d, isDelim := tok.(json.Delim); isDelim && d == '}' {
					stack = stack[:len(stack)-1]
					next(stack)
					continue
				}
				f.key, f.wantKey = tok.(string), false
				if visit(pathOf(stack), off) {
					return "", nil
				}
				continue
			}
		}
		if d, isDelim := tok.(json.Delim); isDelim && (d == ']' || d == '}') {
			stack = stack[:len(stack)-1]
			next(stack)
			continue
		}
		if visit(pathOf(stack), off) {
			return "", nil
		}
		if d, isDelim := tok.(json.Delim); isDelim {
			stack = append(stack, frame{object: d == '{', wantKey: d == '{'})
			continue
		}
		next(stack)
	}
}

// next moves the innermost frame past the value just read.
func next(stack []frame) {
	if len(stack) == 0 {
		return
	}
	f := &stack[len(stack)-1]
	if f.object {
		f.wantKey = true
	} else {
		f.index++
	}
}

// pathOf is the path of the value the stack is reading.
func pathOf(stack []frame) string {
	b := []byte("$")
	for _, f := range stack {
		switch {
		case f.object && f.wantKey:
			// Between members: the object itself.
		case f.object:
			b = append(append(b, '.'), f.key...)
		default:
			b = append(append(append(b, '['), strconv.Itoa(f.index)...), ']')
		}
	}
	return string(b)
}

// skipSpace is the offset of the next token at or after off: past white
// space and the separators the decoder reads with the token before.
func skipSpace(data []byte, off int64) int64 {
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\n', '\r', ',', ':':
			off++
		default:
			return off
		}
	}
	return off
}
