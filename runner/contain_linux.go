package runner

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/sys/cgroup"
	"github.com/durable-lease/durable-lease/internal/sys/procfs"
	"github.com/durable-lease/durable-lease/lease"
)

// selfStart is this process's start time, for the name of its cgroup.
func selfStart() (uint64, error) {
	st, err := procfs.ReadStat(os.Getpid())
	return st.Start, err
}

// processLives reports whether the process pid that started at start
// still runs.
func processLives(pid int, start uint64) bool {
	st, err := procfs.ReadStat(pid)
	return err == nil && st.Start == start && !st.Gone()
}

// canStartInto says whether this process can start children inside a
// cgroup below parent (clone3 with CLONE_INTO_CGROUP): the kernel must be
// 5.7 or newer, and a seccomp filter (a container's) may refuse clone3,
// which only trying tells: then a probe is started into a cgroup of its
// own below parent.
func canStartInto(parent string) error {
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		rel := unix.ByteSliceToString(u.Release[:])
		var major, minor int
		if _, err := fmt.Sscanf(rel, "%d.%d", &major, &minor); err == nil && (major < 5 || major == 5 && minor < 7) {
			return fmt.Errorf("the kernel (%s) cannot start a process into a cgroup (clone3 with CLONE_INTO_CGROUP needs Linux 5.7)", rel)
		}
	}
	if !seccompFiltered() {
		return nil
	}
	g, err := cgroup.Create(parent, "pool-run-probe-"+lease.RandomHex(6))
	if err != nil {
		return err
	}
	defer func() { _ = g.Remove(); g.Close() }()
	attr := &syscall.SysProcAttr{}
	intoCgroup(attr, g.FD())
	pid, err := syscall.ForkExec(selfExe(), []string{"pool-run (probe)"}, &syscall.ProcAttr{
		Env: []string{guardianEnv + "=" + asProbe + ":3"}, Sys: attr,
	})
	if err != nil {
		return fmt.Errorf("this process cannot start one into a cgroup (a seccomp filter?): %v", err)
	}
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, 0, nil)
	return nil
}

// seccompFiltered reports a seccomp filter on this process (Seccomp: 2 in
// /proc/self/status), as container runtimes install.
func seccompFiltered() bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("Seccomp:")); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(string(v)))
			return n == 2
		}
	}
	return false
}
