package runner

import (
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// terminalFd returns the descriptor of r when r is a terminal.
func terminalFd(r any) (int, bool) {
	f, ok := r.(*os.File)
	if !ok || f == nil || !term.IsTerminal(int(f.Fd())) {
		return 0, false
	}
	return int(f.Fd()), true
}

// inForeground reports whether this process's group is the foreground
// group of the terminal fd: only then may it change the terminal's modes
// or hand the terminal to a child without being stopped by SIGTTOU.
func inForeground(fd int) bool {
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return err == nil && pgrp == syscall.Getpgrp()
}

// usePty says whether the command gets a pseudo-terminal: when stdin and
// stdout are both a terminal this process is in the foreground of.
func usePty(o *Options) bool {
	if o.NoPty {
		return false
	}
	in, ok := terminalFd(o.Stdin)
	if !ok {
		return false
	}
	if _, ok := terminalFd(o.Stdout); !ok {
		return false
	}
	return inForeground(in)
}

// ptyLink joins the caller's terminal to the command's pseudo-terminal.
type ptyLink struct {
	ptmx    *os.File
	inFd    int
	saved   *term.State
	winch   chan os.Signal
	outDone chan struct{}
}

// startOnPty starts cmd as the leader of a new session whose controlling
// terminal is a new pseudo-terminal of the caller's size, puts the caller's
// terminal in raw mode (so keys, Ctrl-C included, reach the command as
// typed) and copies both ways.
func startOnPty(cmd *exec.Cmd, in *os.File, out io.Writer) (*ptyLink, error) {
	opened, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	defer tty.Close()
	ptmx, err := pollable(opened)
	if err != nil {
		return nil, err
	}
	l := &ptyLink{ptmx: ptmx, inFd: int(in.Fd()), outDone: make(chan struct{})}
	l.resize()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		ptmx.Close()
		return nil, err
	}
	if st, err := term.MakeRaw(l.inFd); err == nil {
		l.saved = st
	}
	l.winch = make(chan os.Signal, 1)
	signal.Notify(l.winch, syscall.SIGWINCH)
	go func() {
		for range l.winch {
			l.resize()
		}
	}()
	go func() { _, _ = io.Copy(ptmx, in) }()
	go func() {
		defer close(l.outDone)
		// Once every holder of the terminal's other side has closed it, a
		// read gives EIO after the last buffered output: that is the end.
		_, _ = io.Copy(out, ptmx)
	}()
	return l, nil
}

// pollable returns the pty master as a non-blocking file the runtime's
// poller serves, and closes f. creack/pty leaves the master in blocking
// mode (it calls Fd on it), so every read of an idle master would hold an
// OS thread and hand the goroutine between threads for each 4 KB chunk:
// output through the pty ran at 80-89% of a direct run instead of 98%.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// resize gives the command's terminal the size of the caller's, through
// the master's raw connection (Fd would make it blocking again).
func (l *ptyLink) resize() {
	ws, err := unix.IoctlGetWinsize(l.inFd, unix.TIOCGWINSZ)
	if err != nil {
		return
	}
	if rc, err := l.ptmx.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, ws) })
	}
}

// close waits (up to grace) for the command's last output, then restores
// the caller's terminal.
func (l *ptyLink) close(grace time.Duration) {
	select {
	case <-l.outDone:
	case <-time.After(grace):
	}
	signal.Stop(l.winch)
	close(l.winch)
	l.restore()
	_ = l.ptmx.Close()
}

func (l *ptyLink) restore() {
	if l.saved != nil {
		_ = term.Restore(l.inFd, l.saved)
		l.saved = nil
	}
}

// foreground hands a terminal on stdin to the command's process group, so
// a command that reads the terminal is not stopped by SIGTTIN, and takes
// it back afterwards.
type foreground struct {
	fd   int
	pgrp int
}

// takeForeground sets attr to make the child's group the terminal's
// foreground group when stdin is a terminal this process is in the
// foreground of; nil otherwise.
func takeForeground(stdin any, attr *syscall.SysProcAttr) *foreground {
	fd, ok := terminalFd(stdin)
	if !ok || !inForeground(fd) {
		return nil
	}
	attr.Foreground, attr.Ctty = true, fd
	// While the child has the terminal this process is a background
	// group; with tostop set, a write to the terminal (a loss line) would
	// stop it before it could stop the child. Ignore SIGTTOU until the
	// terminal is back.
	signal.Ignore(syscall.SIGTTOU)
	return &foreground{fd: fd, pgrp: syscall.Getpgrp()}
}

// restore gives the terminal back to this process's group. It is safe on
// a nil foreground.
func (f *foreground) restore() {
	if f == nil {
		return
	}
	// SIGTTOU has been ignored since takeForeground.
	defer signal.Reset(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(f.fd, unix.TIOCSPGRP, f.pgrp)
}
