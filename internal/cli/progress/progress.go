// Package progress prints a waiter's queue position and ETA on stderr, so
// a wait never looks like a hang: one line updated in place on a terminal,
// a plain line per change otherwise.
package progress

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/durable-lease/durable-lease/pool"
)

// Line is one waiter's progress line.
type Line struct {
	w      io.Writer
	prefix string
	tty    bool
	shown  bool
}

// New returns a progress line on w whose messages start with prefix (the
// program name).
func New(w io.Writer, prefix string) *Line {
	l := &Line{w: w, prefix: prefix}
	if f, ok := w.(*os.File); ok {
		l.tty = term.IsTerminal(int(f.Fd()))
	}
	return l
}

// Show prints the waiter's position; it is a pool.AcquireRequest.OnWait.
func (l *Line) Show(pos pool.Position) {
	line := fmt.Sprintf("%s: queue position %d, eta %s", l.prefix, pos.Position, pool.EtaText(pos.EtaMs))
	if l.tty {
		fmt.Fprintf(l.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(l.w, line)
	}
	l.shown = true
}

// Done ends the in-place line, if any.
func (l *Line) Done() {
	if l.tty && l.shown {
		fmt.Fprint(l.w, "\r\033[K")
		l.shown = false
	}
}
