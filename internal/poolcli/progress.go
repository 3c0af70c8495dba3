package poolcli

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/pool"
)

// progress prints a blocking waiter's queue position and ETA on stderr: one
// line updated in place on a terminal, a plain line per change otherwise,
// so a wait never looks like a hang.
type progress struct {
	w     io.Writer
	tty   bool
	shown bool
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
		p.tty = err == nil
	}
	return p
}

func (p *progress) show(pos pool.Position) {
	line := fmt.Sprintf("pool: queue position %d, eta %s", pos.Position, pool.FormatEta(pos.EtaMs))
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
	p.shown = true
}

// done ends the in-place line, if any.
func (p *progress) done() {
	if p.tty && p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
