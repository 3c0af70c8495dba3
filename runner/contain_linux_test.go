package runner

import (
	"os"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/sys/cgroup"
)

// TestEndedByOtherSeesEveryStepOfAnEnding: whoever takes the lease ends
// the run's cgroup in steps (lease.Work: mark it, freeze and kill it,
// remove the mark, remove the cgroup); a work that dies of it is the
// run's loss at every step, the one between the two removals included,
// where the freeze alone says so (TestGateStopsOnLoss lost its loss
// there, now and then, under -race). What the guardian froze itself it
// thaws before it reports the work gone: thawed, and unmarked, the cgroup
// is the run's own again.
func TestEndedByOtherSeesEveryStepOfAnEnding(t *testing.T) {
	t.Parallel()
	if !slices.Contains(containments(t), ContainCgroup) {
		t.Skip("no cgroup to make")
	}
	s := testStore(t)
	var out lockedBuffer
	o := baton(t, s, &out, nil)
	o.Containment = ContainCgroup
	c, err := contain(&o, "ended")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close(logf(os.Stderr))
	step := func(what string, want bool) {
		t.Helper()
		if got := c.endedByOther(); got != want {
			t.Errorf("%s: endedByOther %v, want %v", what, got, want)
		}
	}
	step("made", false)
	if err := c.cg.Mark(cgroup.EndedMark); err != nil {
		t.Fatal(err)
	}
	step("marked", true)
	if err := c.cg.Freeze(); err != nil {
		t.Fatal(err)
	}
	step("marked and frozen", true)
	if err := unix.Unlinkat(c.cg.FD(), cgroup.EndedMark, unix.AT_REMOVEDIR); err != nil {
		t.Fatal(err)
	}
	step("frozen, the mark removed", true)
	if err := c.cg.Thaw(); err != nil {
		t.Fatal(err)
	}
	step("thawed, unmarked", false)
}
