// Package cgrouptest makes scratch cgroups for tests: each a cgroup v2
// directory of the test's own, next to the test process's cgroup, which
// is emptied (cgroup.kill) and removed when the test ends. The real
// hierarchy is left as it was found: an rmdir that fails because
// something is left fails the test.
package cgrouptest

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/cgroup"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"github.com/durable-lease/durable-lease/lease"
)

// Scratch makes a scratch cgroup and returns its directory. Where no
// cgroup v2 hierarchy is writable (not root, no delegation, another
// system) the test skips, or fails under CI=true (testrun.Missing).
func Scratch(t testing.TB) string {
	t.Helper()
	m, err := cgroup.Mount()
	if err != nil {
		testrun.Missing(t, "no cgroup v2 hierarchy: %v", err)
	}
	own, err := cgroup.Own()
	if err != nil {
		testrun.Missing(t, "no cgroup of this process: %v", err)
	}
	parent := filepath.Join(m, own)
	if !cgroup.Writable(parent) {
		testrun.Missing(t, "the cgroup %s is not writable (run as root, or in a delegated subtree)", parent)
	}
	name := "dl-test-" + strconv.Itoa(os.Getpid()) + "-" + lease.RandomHex(4)
	g, err := cgroup.Create(parent, name)
	if err != nil {
		testrun.Missing(t, "cannot make a scratch cgroup: %v", err)
	}
	dir := g.Dir()
	g.Close()
	t.Cleanup(func() { remove(t, dir) })
	return dir
}

// remove ends and removes the scratch cgroup dir and what is below it.
func remove(t testing.TB, dir string) {
	t.Helper()
	g, err := cgroup.OpenDir(dir)
	if err != nil {
		return // removed by the test
	}
	defer g.Close()
	if err := g.End(5 * time.Second); err != nil {
		t.Errorf("cgrouptest: ending %s: %v", dir, err)
	}
	if err := g.Remove(); err != nil {
		t.Errorf("cgrouptest: removing %s: %v", dir, err)
	}
}

// Delegate hands the cgroup dir to uid and gid as systemd delegates a
// subtree to a user's manager: the directory and its cgroup.procs,
// cgroup.subtree_control and cgroup.threads become theirs, so that the
// user may make cgroups below it and move its own processes between
// them, and no further up.
func Delegate(t testing.TB, dir string, uid, gid int) {
	t.Helper()
	for _, p := range []string{dir, filepath.Join(dir, "cgroup.procs"), filepath.Join(dir, "cgroup.subtree_control"), filepath.Join(dir, "cgroup.threads")} {
		if err := os.Lchown(p, uid, gid); err != nil {
			t.Fatalf("cgrouptest: delegating %s: %v", p, err)
		}
	}
}

// Sub makes a cgroup below dir for the test and returns its directory.
func Sub(t testing.TB, dir, name string) string {
	t.Helper()
	g, err := cgroup.Create(dir, name)
	if err != nil {
		t.Fatalf("cgrouptest: %v", err)
	}
	defer g.Close()
	return g.Dir()
}
