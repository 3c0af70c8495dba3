package testrun

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/cgroup"
)

// EnvCgroupParent is pool-run's variable naming the cgroup its runs'
// cgroups are made in.
const EnvCgroupParent = "POOL_RUN_CGROUP_PARENT"

// scratchCgroup makes a cgroup of this test binary's own beside its
// cgroup, where the hierarchy is writable, and names it in
// POOL_RUN_CGROUP_PARENT for every pool-run the tests start: their runs'
// cgroups are made there, not in the real hierarchy, and whatever a test
// leaves in it goes with it at the end. It returns the function that
// ends and removes it.
func scratchCgroup() func() {
	if os.Getenv(EnvCgroupParent) != "" {
		return func() {} // the caller chose
	}
	m, err := cgroup.Mount()
	if err != nil {
		return func() {}
	}
	own, err := cgroup.Own()
	if err != nil || !cgroup.Writable(filepath.Join(m, own)) {
		return func() {}
	}
	sweepScratch(filepath.Join(m, own))
	g, err := cgroup.Create(filepath.Join(m, own), "dl-test-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatInt(time.Now().UnixNano()%1e9, 36))
	if err != nil {
		return func() {}
	}
	os.Setenv(EnvCgroupParent, g.Dir())
	return func() {
		os.Unsetenv(EnvCgroupParent)
		_ = g.End(5 * time.Second)
		_ = g.Remove()
		g.Close()
	}
}

// sweepScratch ends and removes the scratch cgroups in parent of test
// binaries that are gone (killed by a timeout, or by hand, before their
// deferred removal ran).
func sweepScratch(parent string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "dl-test-")
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || syscall.Kill(pid, 0) == nil {
			continue // alive, or not a name of ours
		}
		g, err := cgroup.OpenDir(filepath.Join(parent, e.Name()))
		if err != nil {
			continue
		}
		_ = g.End(time.Second)
		_ = g.Remove()
		g.Close()
	}
}
