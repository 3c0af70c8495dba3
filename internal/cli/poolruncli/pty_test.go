//go:build linux

package poolruncli

import (
	"bytes"
	"fmt"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// terminal is a pseudo-terminal standing for the user's terminal: the test
// types into and reads from its master side.
type terminal struct {
	ptmx, tty *os.File
	mu        sync.Mutex
	out       bytes.Buffer
}

func newTerminal(t *testing.T, rows, cols uint16) *terminal {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		testrun.Missing(t, "no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { ptmx.Close(); tty.Close() })
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		t.Fatal(err)
	}
	term := &terminal{ptmx: ptmx, tty: tty}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return term
}

func (term *terminal) text() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

func (term *terminal) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(term.text(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("%q never appeared on the terminal; it shows:\n%s", s, term.text())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (term *terminal) modes(t *testing.T) *unix.Termios {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(term.tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return tio
}

// TestPtyMode runs pool-run as the foreground job of a terminal, as a
// person would: the command gets a terminal of its own of the same size,
// keys typed reach it, every line of its output arrives, and the terminal
// is left in the modes it had.
func TestPtyMode(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	term := newTerminal(t, 33, 101)
	before := term.modes(t)
	const lines = 3000
	script := fmt.Sprintf(`echo "child tty: $(tty)"; stty size; test -t 0 && test -t 1 && test -t 2 && echo ALL-TTY
echo READY; read answer; echo "got $answer"
i=0; while [ $i -lt %d ]; do echo "line $i"; i=$((i+1)); done; printf 'END-NO-NEWLINE'`, lines)
	c := r.cmd("--kind", "b", "--", "sh", "-c", script)
	c.Stdin, c.Stdout, c.Stderr = term.tty, term.tty, term.tty
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()

	term.waitFor(t, "READY")
	during := term.modes(t)
	if during.Lflag&(unix.ICANON|unix.ECHO) != 0 {
		t.Errorf("the user's terminal is not raw while the command runs (lflag %#x)", during.Lflag)
	}
	if _, err := term.ptmx.Write([]byte("yes\r")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("pool-run: %v\n%s", err, term.text())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("pool-run did not finish")
	}
	term.waitFor(t, "pool-run: held lease b")
	out := term.text()

	if !strings.Contains(out, "ALL-TTY") {
		t.Errorf("the command did not get a terminal on stdin, stdout and stderr:\n%s", out)
	}
	if strings.Contains(out, "child tty: "+term.tty.Name()) || !strings.Contains(out, "child tty: /dev/pts/") {
		t.Errorf("the command should have a terminal of its own, not %s:\n%.300s", term.tty.Name(), out)
	}
	if !strings.Contains(out, "33 101") {
		t.Errorf("the command's terminal is not the user's size (33 101):\n%.300s", out)
	}
	if !strings.Contains(out, "got yes") {
		t.Errorf("typed input did not reach the command")
	}
	for i := 0; i < lines; i++ {
		if !strings.Contains(out, fmt.Sprintf("line %d\r\n", i)) {
			t.Fatalf("line %d of the output was lost", i)
		}
	}
	if !strings.Contains(out, "END-NO-NEWLINE") {
		t.Errorf("the last output, written just before the exit, was lost")
	}
	after := term.modes(t)
	if after.Lflag != before.Lflag || after.Iflag != before.Iflag || after.Oflag != before.Oflag || after.Cflag != before.Cflag {
		t.Errorf("terminal modes not restored: before %+v after %+v", before, after)
	}
}

// TestStdoutTerminalStdinNot is how lefthook and pre-commit run a hook:
// output on a terminal, stdin not. The command runs on the streams as
// they are (no pseudo-terminal of its own) and still sees its stdin.
func TestStdoutTerminalStdinNot(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	term := newTerminal(t, 24, 80)
	c := r.cmd("--kind", "b", "--", "sh", "-c", `test -t 1 && echo OUT-TTY; test -t 0 || echo STDIN-NOT-TTY; cat`)
	c.Stdin = strings.NewReader("piped-input\n")
	c.Stdout, c.Stderr = term.tty, term.tty
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 1}
	if err := c.Run(); err != nil {
		t.Fatalf("pool-run: %v\n%s", err, term.text())
	}
	term.waitFor(t, "pool-run: held lease b")
	out := term.text()
	for _, want := range []string{"OUT-TTY", "STDIN-NOT-TTY", "piped-input"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal output lacks %q:\n%s", want, out)
		}
	}
}
