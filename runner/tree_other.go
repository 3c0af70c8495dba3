//go:build unix && !linux

package runner

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/sys/procgroup"
)

// Without a subreaper and /proc, the guardian reaches the work through its
// process group: processes that move to a group or session of their own
// (setsid, a detached child) are beyond its reach, as docs/POOL-RUN.md says.

func becomeSubreaper() error { return nil }

const treeComplete = false

type proc struct {
	pid, ppid int
	state     byte
}

// processState cannot be read without /proc: pool-run's stops are then
// caught only by the deadline.
func processState(int) byte { return 'S' }

// descendants stands the work's process group in for the tree: one entry
// whose signals go to the whole group, while it has members.
func descendants(_, pgid int) []proc {
	if !procgroup.New(pgid).Alive() {
		return nil
	}
	return []proc{{pid: -pgid, state: 'S'}}
}

func signalProc(p proc, sig syscall.Signal) { _ = syscall.Kill(p.pid, sig) }

func (p proc) stopped() bool { return false }

const bootClock = unix.CLOCK_MONOTONIC

const (
	ioctlGetTermios = unix.TIOCGETA
	ioctlSetTermios = unix.TIOCSETA
)

func dupOnto(oldfd, newfd int) error { return unix.Dup2(oldfd, newfd) }

// socketpair is a connected pair of stream sockets, closed on exec (set
// under ForkLock, where the flag cannot be given at creation).
func socketpair() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fds[0])
		unix.CloseOnExec(fds[1])
	}
	return fds, err
}

// noChildren: without a subreaper the work's process group is all there
// is to ask about (descendants), so this adds nothing.
func noChildren() bool { return true }

func selfExe() string {
	if exe, err := os.Executable(); err == nil {
		return exe
	}
	return os.Args[0]
}

// inheritedFiles are the descriptors from 3 up (looked for up to 255)
// that this process got open across exec, with nil for the gaps.
func inheritedFiles() []*os.File {
	high := 2
	open := map[int]bool{}
	for fd := 3; fd < 256; fd++ {
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			open[fd] = true
			high = fd
		}
	}
	return filesUpTo(high, open)
}

// intoCgroup does nothing: there are no cgroups off Linux.
func intoCgroup(*syscall.SysProcAttr, int) {}

// cgroupOf is "": there are no cgroups off Linux.
func cgroupOf(int) string { return "" }

// killTree kills the guardian: without /proc its tree cannot be walked;
// the work's process group is stopped after it.
func killTree(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }

// reapOrphans does nothing: without a subreaper no orphan comes here.
func reapOrphans() {}

// recvFlags is 0: the received descriptors are made close-on-exec after
// recvmsg.
const recvFlags = 0
