package poolruncli

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/cgroup/cgrouptest"
	"github.com/durable-lease/durable-lease/internal/sys/procfs"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"github.com/durable-lease/durable-lease/runner"
)

// The containment cases: what pool-run's promise must survive when the
// guardian itself cannot act (stopped, killed, killed with pool-run), on
// the cgroup path (the work in a cgroup of its own, which the kernel
// holds) and on the fallback (the guardian's process tree, with pool-run
// the subreaper above it).

// containments are the ways this host lets pool-run hold a work: the
// tree always, a cgroup where the tests' scratch cgroup could be made
// (root, a delegated subtree; always under CI).
func containments(t *testing.T) []string {
	t.Helper()
	if os.Getenv(testrun.EnvCgroupParent) == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no writable cgroup v2 hierarchy: the cgroup path is untested (CI=true: a failure)")
		}
		return []string{runner.ContainTree}
	}
	return []string{runner.ContainCgroup, runner.ContainTree}
}

// guardianOf is the parent of the work's first process: its guardian.
func (s *sup) guardianOf() int {
	s.t.Helper()
	st, err := procfs.ReadStat(s.pids()[0])
	if err != nil {
		s.t.Fatal(err)
	}
	return st.PPID
}

// TestContainStoppedGuardian: the guardian is stopped (SIGSTOP) and the
// lease is then released by force and taken by a successor. With a
// cgroup, the forced release itself ends the work before it returns: not
// one stamp after the successor holds the lease. With the tree alone,
// pool-run sees the loss at its next heartbeat, and when the stopped
// guardian does not confirm the kill within a quarter second, ends the
// tree itself: the work is gone within that bound. Before, it ran on for
// as long as the guardian stayed stopped.
func TestContainStoppedGuardian(t *testing.T) {
	t.Parallel()
	for _, c := range containments(t) {
		t.Run(c, func(t *testing.T) {
			s := newSup(t)
			p := s.launch("plain", append(supFlags("--ttl", "1"), "--heartbeat", "200ms", "--containment", c), []string{"run", "setsid"}, nil)
			s.waitReady(2)
			g := s.guardianOf()
			if err := syscall.Kill(g, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(g, syscall.SIGCONT) })
			if _, err := s.openStore().ForceRelease(context.Background(), "b", "operator"); err != nil {
				t.Fatal(err)
			}
			took, acq := s.takeOver(5 * time.Second)
			cut := took
			if c == runner.ContainTree {
				// A heartbeat, the guardian's bound (250 ms), and a loaded
				// machine's slack.
				cut = took.Add(200*time.Millisecond + 250*time.Millisecond + 500*time.Millisecond)
				time.Sleep(time.Until(cut))
			}
			s.gone(cut, "once a successor held the lease")
			_ = syscall.Kill(g, syscall.SIGCONT)
			if code := p.wait(10*time.Second, "the forced release"); code != 75 {
				t.Errorf("exit %d after a forced release, want 75; stderr:\n%s", code, p.closingLog())
			}
			s.successorHolds(acq)
			s.noStrays()
		})
	}
}

// TestContainGuardianKilled: the guardian alone is SIGKILLed while the
// work runs with a setsid'd grandchild that ignores SIGTERM. pool-run
// ends everything: through the cgroup, or as the subreaper above the
// guardian, to which the grandchild comes (before, it was re-parented
// past pool-run and ran on), then releases and exits 3.
func TestContainGuardianKilled(t *testing.T) {
	t.Parallel()
	for _, c := range containments(t) {
		t.Run(c, func(t *testing.T) {
			s := newSup(t)
			p := s.launch("plain", append(supFlags(), "--containment", c), []string{"run", "setsid"}, nil)
			s.waitReady(2)
			if err := syscall.Kill(s.guardianOf(), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(10*time.Second, "the guardian's death"); code != 3 {
				t.Errorf("exit %d after the guardian died, want 3; stderr:\n%s", code, p.closingLog())
			}
			if !strings.Contains(p.log(), "was killed") {
				t.Errorf("pool-run does not say the work was killed:\n%s", p.log())
			}
			s.gone(p.end, "after pool-run exited")
			s.leaseFree()
			s.noStrays()
		})
	}
}

// TestContainKillBoth: pool-run and its guardian are SIGKILLed together
// (an OOM kill of both, a kill -9 of a session's processes) while the
// work runs with a setsid'd server holding a TCP port. Nothing is left to
// act but the lease: the successor, taking it over once it lapses, ends
// what is left in the run's cgroup before its acquire returns, so nothing
// of the first run ticks, or holds the port, once the successor holds the
// lease. Without a cgroup nothing can reach such a work (docs/POOL-RUN.md,
// "What remains possible").
func TestContainKillBoth(t *testing.T) {
	if os.Getenv(testrun.EnvCgroupParent) == "" {
		containments(t) // fails under CI
		testrun.Missing(t, "no writable cgroup v2 hierarchy: a successor ends a predecessor's leftovers only through its cgroup")
	}
	s := newSup(t)
	needed(t, "python3", "the detached server that holds a port is a python3 script")
	port := freePort(t)
	p := s.launch("plain", supFlags(), []string{"run", "setsid", "port=" + strconv.Itoa(port)}, nil)
	s.waitReady(3)
	g := s.guardianOf()
	// Killed together: stopped first, so that neither acts on the
	// other's death in the moment between the two kills (the guardian
	// ends the work when pool-run dies, and on a loaded host it did so
	// before its own SIGKILL arrived).
	_ = syscall.Kill(g, syscall.SIGSTOP)
	_ = syscall.Kill(p.c.Process.Pid, syscall.SIGSTOP)
	_ = syscall.Kill(p.c.Process.Pid, syscall.SIGKILL)
	_ = syscall.Kill(g, syscall.SIGKILL)
	p.wait(5*time.Second, "SIGKILL")
	if bindable(port) == nil {
		t.Fatalf("port %d is free at once: the work did not outlive pool-run and its guardian, the case proves nothing", port)
	}
	took, acq := s.takeOver(10 * time.Second)
	if !acq.TookOverExpired {
		t.Errorf("the successor did not take over an expired lease: %+v", acq)
	}
	if err := bindable(port); err != nil {
		t.Errorf("port %d is still held when the successor holds the lease: %v", port, err)
	}
	s.gone(took, "once the successor held the lease")
	s.successorHolds(acq)
	s.noStrays()
}

// TestContainWorkLeavesItsCgroup: a process of the work moves itself out
// of the run's cgroup into another it may write (here a sibling cgroup as
// root). It is still below the guardian, the subreaper: it is found,
// ended with the rest, and reported, not lost.
func TestContainWorkLeavesItsCgroup(t *testing.T) {
	parent := os.Getenv(testrun.EnvCgroupParent)
	if parent == "" {
		containments(t)
		testrun.Missing(t, "no writable cgroup v2 hierarchy")
	}
	elsewhere := cgrouptest.Sub(t, parent, "elsewhere-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatInt(time.Now().UnixNano()%1e6, 10))
	s := newSup(t)
	p := s.launch("plain", supFlags(), []string{"run", "escape=" + elsewhere}, nil)
	s.waitReady(2)
	s.touch("stop")
	p.wait(10*time.Second, "the work ended")
	s.gone(p.end, "after pool-run exited")
	if !strings.Contains(p.log(), "left its cgroup") {
		t.Errorf("pool-run does not report the process that left its cgroup:\n%s", p.log())
	}
	s.leaseFree()
	s.noStrays()
}

// TestContainStarvedSupervisors: pool-run and its guardian get no CPU (a
// starved host: here both are stopped, the extreme of starvation) while
// the work runs on, at a short TTL; the lease lapses and a contender
// takes it over. Its takeover ends what is left in the run's cgroup
// before its acquire returns: not one stamp of the first run within the
// contender's hold. Continued, pool-run exits 75. (Niced under CPU hogs,
// the same run wrote 34 stamps inside a contender's hold before; without a
// cgroup nothing can end a work whose supervisors do not run, see
// docs/POOL-RUN.md.)
func TestContainStarvedSupervisors(t *testing.T) {
	if os.Getenv(testrun.EnvCgroupParent) == "" {
		containments(t)
		testrun.Missing(t, "no writable cgroup v2 hierarchy: a contender ends a starved holder's work only through its cgroup")
	}
	s := newSup(t)
	p := s.launch("plain", supFlags("--ttl", "0.02"), []string{"run", "setsid"}, nil)
	s.waitReady(2)
	g := s.guardianOf()
	t.Cleanup(func() { _ = syscall.Kill(g, syscall.SIGCONT) })
	s.stopOutsideGuard("b", p.c.Process.Pid, g)
	if len(s.ticksIn(time.Now().Add(-time.Second), time.Now().Add(time.Hour))) == 0 {
		t.Fatal("the work does not run while its supervisors are stopped: the case proves nothing")
	}
	took, acq := s.takeOver(10 * time.Second)
	if !acq.TookOverExpired {
		t.Errorf("the contender did not take over the lapsed lease: %+v", acq)
	}
	s.gone(took, "once the contender held the lease")
	for _, pid := range []int{g, p.c.Process.Pid} {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	if code := p.wait(10*time.Second, "SIGCONT"); code != 75 {
		t.Errorf("exit %d after the lease lapsed, want 75; stderr:\n%s", code, p.closingLog())
	}
	s.successorHolds(acq)
	s.noStrays()
}

// stopOutsideGuard stops pids (SIGSTOP) at a moment none of them is inside
// kind's critical section. A process stopped inside it (a heartbeat's
// write, microseconds) keeps every other user of the kind at guard_busy
// until it is continued, by design (docs/POOL-RUN.md, "What remains
// possible"; a live holder's guard is never taken, PROTOCOL 3.3): that is
// not the starvation a case means to stage, so such a stop is undone
// and tried again. Nothing else uses the kind meanwhile, so any guard
// present belongs to pids.
func (s *sup) stopOutsideGuard(kind string, pids ...int) {
	s.t.Helper()
	guard := filepath.Join(s.store, ".guard-"+kind)
	for try := 0; try < 200; try++ {
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				s.t.Fatal(err)
			}
		}
		waitFor(time.Second, func() bool {
			for _, pid := range pids {
				if !strings.HasPrefix(state(pid), "state T") {
					return false
				}
			}
			return true
		})
		if _, err := os.Lstat(guard); errors.Is(err, fs.ErrNotExist) {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		time.Sleep(3 * time.Millisecond)
	}
	s.t.Fatalf("%s stayed in the critical section of kind %s at every one of 200 stops", s.states(), kind)
}
