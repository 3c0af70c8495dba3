package runner

import (
	"bytes"
	"io"
	"os"
	"os/signal"
	"sync"
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
// group of the terminal fd.
func inForeground(fd int) bool {
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return err == nil && pgrp == syscall.Getpgrp()
}

// workIO is how the work's streams are wired to pool-run's.
//
// The work never has pool-run's terminal as its own: a process on a
// terminal it is in the background of is stopped by the terminal (SIGTTOU
// on output with tostop set, SIGTTIN on input, SIGTTOU on a mode change)
// while pool-run, unstopped, kept heartbeating. So each of pool-run's
// streams that is a terminal becomes, for the work, one pseudo-terminal of
// its own (the work leads a session on it, and is its foreground), which
// pool-run copies to and from; the other streams are passed as they are.
// Without any terminal stream, or with NoPty, the work gets the streams
// as they are in a session without a controlling terminal.
type workIO struct {
	stdin      io.Reader
	stdout     io.Writer
	stderr     io.Writer
	ctty       int // the work's descriptor of its pty, or -1
	link       *ptyLink
	termFile   *os.File      // the terminal whose modes pool-run changed
	saved      *unix.Termios // its modes before
	closeAfter []io.Closer   // to close once the guardian has them
}

// wireStdio decides the work's streams. A gate's phases read nothing
// from a terminal.
func wireStdio(o *Options, gate bool) (*workIO, error) {
	w := &workIO{stdin: o.Stdin, stdout: o.Stdout, stderr: o.Stderr, ctty: -1}
	inFd, inT := terminalFd(o.Stdin)
	outFd, outT := terminalFd(o.Stdout)
	_, errT := terminalFd(o.Stderr)
	if inT && (gate || !inForeground(inFd)) {
		// Reading a terminal it is not in the foreground of would stop
		// pool-run itself: the work reads nothing instead.
		null, err := os.Open(os.DevNull)
		if err != nil {
			return nil, err
		}
		w.stdin, inT = null, false
		w.closeAfter = append(w.closeAfter, null)
	}
	if o.NoPty || !inT && !outT && !errT {
		return w, nil
	}
	opened, slave, err := pty.Open()
	if err != nil {
		return nil, err
	}
	master, err := pollable(opened)
	if err != nil {
		slave.Close()
		return nil, err
	}
	l := &ptyLink{ptmx: master, outDone: make(chan struct{})}
	w.link = l
	w.closeAfter = append(w.closeAfter, slave)
	if inT {
		w.stdin, w.ctty = slave, 0
		l.in, l.inFd = o.Stdin.(*os.File), inFd
	}
	var out io.Writer
	if outT {
		w.stdout, out = slave, o.Stdout
		if w.ctty < 0 {
			w.ctty = 1
		}
		l.sizeFd = outFd
	}
	if errT {
		w.stderr = slave
		if out == nil {
			out = o.Stderr
		}
		if w.ctty < 0 {
			w.ctty = 2
		}
		if l.sizeFd == 0 {
			l.sizeFd, _ = terminalFd(o.Stderr)
		}
	}
	if inT {
		l.sizeFd = inFd
	}
	if gate {
		w.ctty = -1 // phases run off any controlling terminal
	}
	l.resize()
	if l.in != nil {
		// The terminal goes raw so keys reach the work's pty as typed,
		// but keeps its signals: Ctrl-C and Ctrl-Z are pool-run's, which
		// stops or ends the whole work with its lease in mind.
		saved, err := unix.IoctlGetTermios(inFd, ioctlGetTermios)
		if err == nil {
			w.saved, w.termFile = saved, l.in
			l.saved = saved
			l.makeRaw()
		}
	}
	l.winch = make(chan os.Signal, 1)
	signal.Notify(l.winch, syscall.SIGWINCH)
	go func() {
		for range l.winch {
			l.resize()
		}
	}()
	if l.in != nil {
		go func() { _, _ = io.Copy(master, l.in) }()
	}
	go func() {
		defer close(l.outDone)
		// Once every holder of the pty's other side has closed it, a
		// read gives EIO after the last buffered output: that is the end.
		_, _ = io.Copy(out, master)
	}()
	return w, nil
}

// started is called once the guardian holds the work's streams.
func (w *workIO) started() {
	for _, c := range w.closeAfter {
		_ = c.Close()
	}
	w.closeAfter = nil
}

// finish waits up to grace for the work's last output and gives the
// terminal its modes back.
func (w *workIO) finish(grace time.Duration) {
	w.started()
	if w.link != nil {
		w.link.close(grace)
	}
}

// ptyLink joins pool-run's terminal to the work's pseudo-terminal.
type ptyLink struct {
	ptmx    *os.File
	in      *os.File // the terminal keys come from, if stdin is one
	inFd    int
	sizeFd  int
	saved   *unix.Termios
	winch   chan os.Signal
	outDone chan struct{}
}

// makeRaw puts the input terminal in raw mode, signals kept.
func (l *ptyLink) makeRaw() {
	if l.saved == nil {
		return
	}
	t := *l.saved
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.IEXTEN
	t.Lflag |= unix.ISIG
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	_ = unix.IoctlSetTermios(l.inFd, ioctlSetTermios, &t)
}

// restore gives the input terminal its modes back.
func (l *ptyLink) restore() {
	if l.saved != nil {
		_ = unix.IoctlSetTermios(l.inFd, ioctlSetTermios, l.saved)
	}
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

// resize gives the work's terminal the size of pool-run's, through the
// master's raw connection (Fd would make it blocking again).
func (l *ptyLink) resize() {
	ws, err := unix.IoctlGetWinsize(l.sizeFd, unix.TIOCGWINSZ)
	if err != nil {
		return
	}
	if rc, err := l.ptmx.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, ws) })
	}
}

// close waits (up to grace) for the work's last output, then restores
// the terminal.
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

// hasTerminal says whether this process has a controlling terminal.
func hasTerminal() bool {
	f, err := os.OpenFile("/dev/tty", os.O_RDONLY|unix.O_NOCTTY, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// filesUpTo lists fds 3..high as files where open says so, nil elsewhere.
func filesUpTo(high int, open map[int]bool) []*os.File {
	var out []*os.File
	for fd := 3; fd <= high; fd++ {
		if open[fd] {
			out = append(out, inheritedFile(fd))
		} else {
			out = append(out, nil)
		}
	}
	return out
}

// inherited holds an *os.File for each inherited descriptor passed on so
// far, for the life of the process. Such a file must stay reachable: an
// unreachable *os.File closes its descriptor in a finalizer, which, for a
// descriptor this process got rather than opened, would close it for
// good, and once its number was reused, a socket or a file of a later
// run (a library caller runs Command more than once).
var inherited struct {
	sync.Mutex
	files map[int]*os.File
}

// inheritedFile is the one *os.File of the inherited descriptor fd.
func inheritedFile(fd int) *os.File {
	inherited.Lock()
	defer inherited.Unlock()
	if f, ok := inherited.files[fd]; ok {
		return f
	}
	if inherited.files == nil {
		inherited.files = make(map[int]*os.File)
	}
	f := os.NewFile(uintptr(fd), "inherited")
	inherited.files[fd] = f
	return f
}

// crlf writes lines to a terminal in raw mode, where a newline alone no
// longer returns the carriage.
type crlf struct{ w io.Writer }

func (c crlf) Write(p []byte) (int, error) {
	if _, err := c.w.Write(bytes.ReplaceAll(p, []byte("\n"), []byte("\r\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}
