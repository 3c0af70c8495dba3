package hosttest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/cgroup"
	"github.com/durable-lease/durable-lease/internal/sys/cgroup/cgrouptest"
	"github.com/durable-lease/durable-lease/internal/sys/procfs"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
)

// bomb is a work that forks all it can: a detached writer that stamps a
// file every 50 ms, then detached sleepers until fork fails (the shell
// then exits 2, "Cannot fork"), which leaves the writer and the sleepers
// behind. Jest workers, browsers and parallel builds meet the same
// limits (ulimit -u, a container's pids.max) every day.
const bomb = `#!/bin/sh
setsid sh -c 'while :; do date +%s%N >> stamps; sleep 0.05; done' &
while :; do setsid sleep 1000 & done
`

// quiet checks that nothing writes stamps in dir any more and that no
// process is left with dir as its working directory.
func quiet(t *testing.T, dir string) {
	t.Helper()
	stamps := filepath.Join(dir, "stamps")
	count := func() int {
		b, _ := os.ReadFile(stamps)
		return bytes.Count(b, []byte("\n"))
	}
	time.Sleep(100 * time.Millisecond)
	before := count()
	time.Sleep(500 * time.Millisecond)
	if after := count(); after != before {
		t.Errorf("the work's writer ran on after pool-run exited: %d stamps in half a second", after-before)
	}
	if left := processesIn(dir); len(left) > 0 {
		t.Errorf("%d process(es) of the work still run after pool-run exited: %v", len(left), left)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// processesIn lists the live processes whose working directory is dir.
func processesIn(dir string) []int {
	pids, _ := procfs.PIDs()
	var out []int
	for _, pid := range pids {
		if cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd"); err == nil && cwd == dir {
			if st, err := procfs.ReadStat(pid); err == nil && st.State != 'Z' {
				out = append(out, pid)
			}
		}
	}
	return out
}

// bombDir is a directory of nobody's with the bomb in it.
func bombDir(t *testing.T) string {
	t.Helper()
	dir := scratch(t)
	if err := os.WriteFile(filepath.Join(dir, "bomb.sh"), []byte(bomb), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range processesIn(dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return dir
}

// bombOutcome checks how a run of the bomb ended: with the work's own
// failure (the shell's "Cannot fork", 2) or pool-run's internal status
// with the limit named, never a crash of pool-run or its guardian (the Go
// runtime's "failed to create new OS thread", exit 2 that reads as a
// usage error) nor 126 (which says the command cannot be executed).
func bombOutcome(t *testing.T, r result) {
	t.Helper()
	switch {
	case strings.Contains(r.stderr, "runtime: "), strings.Contains(r.stderr, "fatal error"):
		t.Errorf("pool-run or its guardian crashed (exit %d):\n%s", r.exit, r.stderr)
	case r.exit == 2 && strings.Contains(r.stderr, "failed with exit 2"):
	case r.exit == 3 && strings.Contains(r.stderr, "limit"):
	default:
		t.Errorf("exit %d, want the work's own 2 or 3 naming a limit:\n%s", r.exit, r.stderr)
	}
}

// TestForkBombUnderUlimit: as nobody with ulimit -u 80, a work that forks
// until the limit. pool-run and its guardian made their threads before
// the work ran, so neither crashes; the run ends with the work's own
// failure; nothing of it runs on; the lease is free. On the cgroup path
// nobody's pool-run runs in a delegated subtree (as systemd gives a
// user's manager), makes the run's cgroup below it and ends the work
// through it; on the fallback, as the guardian's tree. Before, in most
// runs pool-run or the guardian died of it (exit 2 or 3), and the writer
// and dozens of sleepers ran on with the lease released.
func TestForkBombUnderUlimit(t *testing.T) {
	needRoot(t)
	for _, mode := range []string{"cgroup", "tree"} {
		t.Run(mode, func(t *testing.T) {
			dir := bombDir(t)
			env := []string{"LEASE_STORE=" + filepath.Join(dir, "store")}
			fd := -1
			var deleg string
			if mode == "cgroup" {
				deleg = cgrouptest.Sub(t, cgrouptest.Scratch(t), "user-nobody")
				cgrouptest.Delegate(t, deleg, nobody, nobody)
				g, err := cgroup.OpenDir(deleg)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				fd = g.FD()
			} else {
				env = append(env, "POOL_RUN_CONTAINMENT=tree")
			}
			r := runIn(t, asNobody, fd, dir, 0o022, env, "/bin/bash", "-c",
				"ulimit -u 80 && exec pool-run --kind bomb --ttl 0.1 --heartbeat 300ms --summary-json summary.json -- ./bomb.sh")
			bombOutcome(t, r)
			quiet(t, dir)
			if s := run(t, asNobody, dir, 0o022, env, "lease", "status", "--kind", "bomb"); s.json(t)["state"] != "free" {
				t.Errorf("the lease after the run: %s", s.stdout)
			}
			if mode == "cgroup" {
				sum, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
				if !bytes.Contains(sum, []byte(`"kind": "cgroup"`)) {
					t.Errorf("the run was not in a cgroup of its own: %s", sum)
				}
				ents, _ := os.ReadDir(deleg)
				for _, e := range ents {
					if e.IsDir() {
						t.Errorf("the run's cgroup %s is left in the delegated subtree", e.Name())
					}
				}
			}
		})
	}
}

// v1Pids is the mount point of a cgroup v1 hierarchy with the pids
// controller, "" when there is none.
func v1Pids() string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		for i, x := range f {
			if x == "-" && i+3 < len(f) && f[i+1] == "cgroup" && strings.Contains(","+f[i+3]+",", ",pids,") && f[3] == "/" {
				return f[4]
			}
		}
	}
	return ""
}

// TestForkBombUnderPidsMax: pool-run inside a pids limit, as in a
// container with pids.max (here a scratch cgroup of the pids controller,
// v1 on hybrid hosts, around pool-run itself, 60 tasks): the work forks
// until the limit, which pool-run and its guardian share. The run ends
// with the work's own failure or a limit named, nothing runs on, and the
// lease is free.
func TestForkBombUnderPidsMax(t *testing.T) {
	needRoot(t)
	mount := v1Pids()
	if mount == "" {
		testrun.Missing(t, "no cgroup v1 pids hierarchy here (a v2 host gives pool-run pids.max of its own instead)")
	}
	sweepPidsScratch(mount)
	limit := filepath.Join(mount, fmt.Sprintf("dl-test-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6))
	if err := os.Mkdir(limit, 0o755); err != nil {
		testrun.Missing(t, "cannot make a pids cgroup: %v", err)
	}
	t.Cleanup(func() {
		for i := 0; i < 50; i++ {
			if os.Remove(limit) == nil || errors.Is(os.Remove(limit), os.ErrNotExist) {
				return
			}
			if b, _ := os.ReadFile(filepath.Join(limit, "cgroup.procs")); len(b) > 0 {
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("the pids cgroup %s could not be removed", limit)
	})
	if err := os.WriteFile(filepath.Join(limit, "pids.max"), []byte("60"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"cgroup", "tree"} {
		t.Run(mode, func(t *testing.T) {
			dir := bombDir(t)
			env := []string{"LEASE_STORE=" + filepath.Join(dir, "store"), "POOL_RUN_CONTAINMENT=" + mode}
			if mode == "cgroup" {
				env = append(env, "POOL_RUN_CGROUP_PARENT="+cgrouptest.Scratch(t))
			}
			// The shell moves itself into the limit, then becomes pool-run.
			r := runIn(t, nil, -1, dir, 0o022, env, "/bin/sh", "-c",
				"echo $$ > "+filepath.Join(limit, "cgroup.procs")+" && exec pool-run --kind bomb --ttl 0.1 --heartbeat 300ms -- ./bomb.sh")
			bombOutcome(t, r)
			quiet(t, dir)
			if s := run(t, nil, dir, 0o022, env, "lease", "status", "--kind", "bomb"); s.json(t)["state"] != "free" {
				t.Errorf("the lease after the run: %s", s.stdout)
			}
		})
	}
}

// intoCgroup makes the command start inside the cgroup open as fd.
func intoCgroup(attr *syscall.SysProcAttr, fd int) {
	attr.UseCgroupFD, attr.CgroupFD = true, fd
}

// TestCgroupParentOutOfReach: nobody names a cgroup delegated to it as the
// parent of its runs, but runs pool-run from a cgroup it may not move
// processes out of (the common ancestor is root's). No process could
// start in the run's cgroup: --explain says the tree, with why; a run in
// auto holds the work as the tree; one that asks for a cgroup fails before
// acquiring. Before, --explain said cgroup and the run failed after
// acquiring (exit 3, "permission denied").
func TestCgroupParentOutOfReach(t *testing.T) {
	needRoot(t)
	dir := bombDir(t)
	deleg := cgrouptest.Sub(t, cgrouptest.Scratch(t), "user-nobody")
	cgrouptest.Delegate(t, deleg, nobody, nobody)
	env := []string{"LEASE_STORE=" + filepath.Join(dir, "store"), "POOL_RUN_CGROUP_PARENT=" + deleg}
	ex := run(t, asNobody, dir, 0o022, env, "pool-run", "--kind", "k", "--explain")
	if out := ex.json(t); ex.exit != 0 || out["containment"].(map[string]any)["kind"] != "tree" ||
		!strings.Contains(out["containment"].(map[string]any)["why"].(string), "common ancestor") {
		t.Errorf("--explain: exit %d %s; want the tree, the common ancestor named", ex.exit, ex.stdout)
	}
	if r := run(t, asNobody, dir, 0o022, env, "pool-run", "--kind", "k", "--", "true"); r.exit != 0 {
		t.Errorf("a run in auto: exit %d %s", r.exit, r.stderr)
	}
	r := run(t, asNobody, dir, 0o022, env, "pool-run", "--kind", "k", "--containment", "cgroup", "--", "sh", "-c", "echo ran > ran.txt")
	if r.exit != 3 || !strings.Contains(r.stderr, "common ancestor") {
		t.Errorf("a run asking for a cgroup: exit %d %s; want 3 naming the common ancestor", r.exit, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran.txt")); err == nil {
		t.Error("the command ran")
	}
	if s := run(t, asNobody, dir, 0o022, env, "lease", "status", "--kind", "k"); s.json(t)["state"] != "free" {
		t.Errorf("the lease: %s", s.stdout)
	}
}

// sweepPidsScratch removes the empty scratch cgroups this test left in the
// v1 pids hierarchy from test binaries that are gone (killed before their
// cleanup ran), as testrun sweeps the v2 ones: the host's hierarchy is
// left as it was found.
func sweepPidsScratch(mount string) {
	ents, _ := os.ReadDir(mount)
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "dl-test-")
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		if pid, err := strconv.Atoi(pidText); err == nil && syscall.Kill(pid, 0) != nil {
			_ = os.Remove(filepath.Join(mount, e.Name())) // only if empty
		}
	}
}
