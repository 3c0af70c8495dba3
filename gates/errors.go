package gates

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrInvalid is matched (with errors.Is) by every error this package
// returns for a gate file that cannot be used.
var ErrInvalid = errors.New("gates: invalid gate file")

// Error is a problem at a place in a gate file. Line and Column are 1-based
// and count characters, as the YAML parser does; Line is 0 when the problem
// has no place (the file cannot be read, or is empty).
type Error struct {
	Path         string
	Line, Column int
	Msg          string

	// cause is an underlying error (such as the operating system's reason a
	// file cannot be opened) that Is also matches.
	cause error
}

// Error formats the problem as "PATH:LINE:COL: MSG", leaving out ":LINE:COL"
// when Line is 0 and ":COL" when Column is 0.
func (e *Error) Error() string {
	switch {
	case e.Line == 0:
		return e.Path + ": " + e.Msg
	case e.Column == 0:
		return e.Path + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
	default:
		return e.Path + ":" + strconv.Itoa(e.Line) + ":" + strconv.Itoa(e.Column) + ": " + e.Msg
	}
}

// Is reports whether target is [ErrInvalid], or matches the underlying
// error of a file that could not be read (so errors.Is(err, fs.ErrNotExist)
// works for a missing file).
func (e *Error) Is(target error) bool {
	if target == ErrInvalid {
		return true
	}
	return e.cause != nil && errors.Is(e.cause, target)
}

// errorAt builds an *Error at a 1-based line and column of path. String
// arguments, which echo text from the file, are clipped so that a hostile
// file cannot make a message huge.
func errorAt(path string, line, col int, format string, args ...any) *Error {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = clip(s)
		}
	}
	return &Error{Path: path, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

// maxEcho is how many characters of the file's text a message repeats.
const maxEcho = 80

// clip shortens s to maxEcho characters, marking a cut with "...".
func clip(s string) string {
	n := 0
	for i := range s {
		if n == maxEcho {
			return s[:i] + "..."
		}
		n++
	}
	return s
}
