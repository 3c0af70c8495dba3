package runner

import (
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/sys/cgroup"
	"github.com/durable-lease/durable-lease/internal/sys/procfs"
	"github.com/durable-lease/durable-lease/internal/sys/procgroup"
)

// On Linux the guardian is a child subreaper: every process of the work
// that is orphaned (a daemon that double-forks, a `setsid` grandchild, a
// test runner's detached web server) is re-parented to it rather than to
// init, so the tree of processes below the guardian is the whole work,
// wherever it moved in terms of process groups and sessions, and "the
// guardian has no children" means "nothing of the work runs".

// becomeSubreaper makes this process the reaper of its orphaned
// descendants.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// treeComplete says whether descendants finds every process of the work,
// including those that left its process group or session.
const treeComplete = true

// proc is one process as /proc/PID/stat shows it.
type proc struct {
	pid, ppid int
	state     byte // R, S, D, T (stopped), t (traced), Z (zombie), ...
}

// readStat reads /proc/PID/stat; ok is false for a process that is gone.
func readStat(pid int) (p proc, ok bool) {
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return p, false
	}
	return proc{pid: st.PID, ppid: st.PPID, state: st.State}, true
}

// processState is the state letter of pid ('T' stopped, 't' traced,
// 'Z' zombie, ...), or 0 when it is gone.
func processState(pid int) byte {
	p, ok := readStat(pid)
	if !ok {
		return 0
	}
	return p.state
}

// descendants lists every live process below root (zombies excluded: they
// run nothing and their parent or the guardian reaps them). The fallback
// pgid is not needed here: the subreaper keeps the whole tree below root.
// It walks the kernel's lists of each thread's children, so it costs what
// the tree holds, not what the machine runs; without them (a kernel built
// without CONFIG_PROC_CHILDREN) it reads every process's parent instead.
func descendants(root, _ int) []proc {
	if !procfs.HasChildrenLists() {
		return descendantsByScan(root)
	}
	var out []proc
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range childrenOf(pid) {
			p, ok := readStat(c)
			if !ok || p.ppid != pid {
				continue // gone, or the pid is another process's already
			}
			queue = append(queue, c)
			if p.state != 'Z' && p.state != 'X' {
				out = append(out, p)
			}
		}
	}
	return out
}

// childrenOf lists the children of every thread of pid.
func childrenOf(pid int) []int { return procfs.Children(pid) }

// descendantsByScan is descendants from every process's parent.
func descendantsByScan(root int) []proc {
	pids, _ := procfs.PIDs()
	children := make(map[int][]proc)
	for _, pid := range pids {
		if p, ok := readStat(pid); ok {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []proc
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			queue = append(queue, c.pid)
			if c.state != 'Z' && c.state != 'X' {
				out = append(out, c)
			}
		}
	}
	return out
}

// signalProc sends sig to one process of the tree.
func signalProc(p proc, sig syscall.Signal) { _ = syscall.Kill(p.pid, sig) }

// stopped says whether a process is in a stop (by a signal or a tracer).
func (p proc) stopped() bool { return p.state == 'T' || p.state == 't' }

// bootClock is the clock the deadlines between pool-run and its guardian
// are counted on: it keeps running through a suspend of the machine, as a
// lease's TTL does on the store.
const bootClock = unix.CLOCK_BOOTTIME

// Terminal mode ioctls.
const (
	ioctlGetTermios = unix.TCGETS
	ioctlSetTermios = unix.TCSETS
)

// dupOnto makes fd newfd a copy of oldfd.
func dupOnto(oldfd, newfd int) error { return unix.Dup3(oldfd, newfd, 0) }

// socketpair is a connected pair of stream sockets, closed on exec.
func socketpair() ([2]int, error) {
	return unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
}

// noChildren says whether the guardian has no child left, zombies
// included. As the subreaper it is the parent of every orphan of the
// work, and the kernel re-parents a process's children before that
// process can be reaped: so "no child" is the one atomic proof that
// nothing of the work runs, which no walk of /proc can give.
func noChildren() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == unix.ECHILD
}

// selfExe is the running executable, even if its file was replaced or
// removed since it started (a `go install` during a gate).
func selfExe() string { return "/proc/self/exe" }

// inheritedFiles are the descriptors from 3 up that this process got
// open across exec (not close-on-exec), in order, with nil for the gaps
// below the highest, as exec.Cmd.ExtraFiles takes them.
func inheritedFiles() []*os.File {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	high := 2
	open := map[int]bool{}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < 3 {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			open[fd] = true
			high = max(high, fd)
		}
	}
	return filesUpTo(high, open)
}

// intoCgroup makes a child started with attr begin in the cgroup whose
// directory is open as fd (clone3 with CLONE_INTO_CGROUP).
func intoCgroup(attr *syscall.SysProcAttr, fd int) {
	attr.UseCgroupFD, attr.CgroupFD = true, fd
}

// cgroupOf is the v2 cgroup of pid ("" when it is gone).
func cgroupOf(pid int) string { return cgroup.Of(pid) }

// killTree sends SIGKILL to every process below pid (the guardian, which
// stopped answering), then to pid itself, whose orphans then come to this
// process, the subreaper above it.
func killTree(pid int) {
	for _, p := range descendants(pid, 0) {
		signalProc(p, syscall.SIGKILL)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// reapOrphans ends and reaps what came to this process (pool-run, a
// subreaper) from a guardian that died: every child in a session other
// than this process's own, since the work runs in sessions of its own
// and pool-run's own children (the guardian, a store's or a provisioner's
// programs) never leave its session. It returns when none is left, or
// procgroup.KillWait after it began.
func reapOrphans() {
	sid, err := unix.Getsid(0)
	if err != nil {
		return
	}
	self := os.Getpid()
	deadline := time.Now().Add(procgroup.KillWait)
	for {
		found := false
		for _, pid := range childrenOf(self) {
			if s, err := unix.Getsid(pid); err != nil || s == sid {
				continue
			}
			found = true
			for _, p := range descendants(pid, 0) {
				signalProc(p, syscall.SIGKILL)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
		if !found || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// recvFlags makes the descriptors received on the guardian's socket
// close-on-exec as they arrive.
const recvFlags = unix.MSG_CMSG_CLOEXEC
