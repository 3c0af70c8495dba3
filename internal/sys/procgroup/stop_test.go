//go:build unix

package procgroup

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/procfs"
)

// patience bounds every wait of these tests; reaching it means a bug.
const patience = 10 * time.Second

// tree starts script under sh as the leader of a process group of its
// own, in dir, and waits until the script has written each of the files
// in ready (a pid and a newline each, or any line). It returns the group.
func tree(t *testing.T, dir, script string, ready ...string) *Group {
	t.Helper()
	c := exec.Command("sh", "-c", script)
	c.Dir = dir
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Wait() }() // reap the leader whenever it ends
	t.Cleanup(func() { _ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL) })
	for _, name := range ready {
		readLine(t, filepath.Join(dir, name))
	}
	return New(c.Process.Pid)
}

// readLine waits for path to hold a whole line and returns it.
func readLine(t *testing.T, path string) string {
	t.Helper()
	for deadline := time.Now().Add(patience); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("%s was never written", path)
	return ""
}

// pidIn reads the pid the script wrote to name.
func pidIn(t *testing.T, dir, name string) int {
	t.Helper()
	pid, err := strconv.Atoi(readLine(t, filepath.Join(dir, name)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// live reports whether pid is a process other than a zombie.
func live(pid int) bool {
	st, err := procfs.ReadStat(pid)
	return err == nil && st.State != 'Z'
}

// stop runs Stop on g and reports its error and how long it took.
func stop(ctx context.Context, grace time.Duration, groups ...*Group) (time.Duration, error) {
	start := time.Now()
	err := Stop(ctx, grace, groups...)
	return time.Since(start), err
}

func TestStopEndsAGroupOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	g := tree(t, dir, `sleep 60 & echo $! > child; wait`, "child")
	child := pidIn(t, dir, "child")
	took, err := stop(context.Background(), time.Minute, g)
	if err != nil || took > 5*time.Second {
		t.Errorf("Stop = %v after %v, want nil well before the grace of a minute", err, took)
	}
	if live(child) || g.Alive() {
		t.Errorf("the group is still alive after Stop")
	}
}

// TestStopKillsWhatIgnoresSIGTERM: a grandchild that ignores SIGTERM, and
// a child that the exited leader left behind in the group (a detached
// background job), are killed once the grace has passed, not before.
func TestStopKillsWhatIgnoresSIGTERM(t *testing.T) {
	dir := t.TempDir()
	const grace = 300 * time.Millisecond
	g := tree(t, dir, `
		trap '' TERM
		sh -c 'sleep 60 & echo $! > grandchild; wait' &
		(sleep 60 & echo $! > detached) &
		while [ ! -s grandchild ] || [ ! -s detached ]; do sleep 0.01; done
		echo > ready
		exit 0`, "ready")
	grandchild, detached := pidIn(t, dir, "grandchild"), pidIn(t, dir, "detached")
	for deadline := time.Now().Add(patience); live(g.ID()); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the leader never exited")
		}
	}
	if !g.Alive() {
		t.Fatal("the group is empty once its leader exited; nothing to test")
	}
	took, err := stop(context.Background(), grace, g)
	if err != nil {
		t.Errorf("Stop = %v", err)
	}
	if took < grace || took > grace+5*time.Second {
		t.Errorf("Stop took %v, want the grace of %v and little more", took, grace)
	}
	for name, pid := range map[string]int{"grandchild": grandchild, "detached child": detached} {
		if live(pid) {
			t.Errorf("the %s (pid %d) survived Stop", name, pid)
		}
	}
}

// TestStopGivesTheGrace: a member that handles SIGTERM finishes its
// cleanup within the grace before anything is killed.
func TestStopGivesTheGrace(t *testing.T) {
	dir := t.TempDir()
	g := tree(t, dir, `trap 'sleep 0.2; echo > cleaned; exit 0' TERM; echo > ready; while :; do sleep 0.01; done`, "ready")
	if _, err := stop(context.Background(), 5*time.Second, g); err != nil {
		t.Errorf("Stop = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cleaned")); err != nil {
		t.Errorf("the member was killed before its SIGTERM handler ended: %v", err)
	}
}

// TestStopContinuesAStoppedMember: a member stopped by SIGSTOP acts on
// the SIGTERM at once, instead of being killed at the end of the grace.
func TestStopContinuesAStoppedMember(t *testing.T) {
	dir := t.TempDir()
	g := tree(t, dir, `trap 'echo > cleaned; exit 0' TERM; echo > ready; while :; do sleep 0.01; done`, "ready")
	if err := g.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	took, err := stop(context.Background(), 10*time.Second, g)
	if err != nil || took > 5*time.Second {
		t.Errorf("Stop = %v after %v, want nil well before the grace", err, took)
	}
	if _, err := os.Stat(filepath.Join(dir, "cleaned")); err != nil {
		t.Errorf("the stopped member never ran its SIGTERM handler: %v", err)
	}
}

// TestStopContextKillsAtOnce: a context done during the grace kills what
// is left at once and returns its error.
func TestStopContextKillsAtOnce(t *testing.T) {
	dir := t.TempDir()
	g := tree(t, dir, `trap '' TERM; sleep 60 & echo $! > child; wait`, "child")
	child := pidIn(t, dir, "child")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	took, err := stop(ctx, time.Hour, g)
	if !errors.Is(err, context.DeadlineExceeded) || took > 5*time.Second {
		t.Errorf("Stop = %v after %v, want the context's error soon after it ended", err, took)
	}
	for deadline := time.Now().Add(patience); live(child); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the member that ignores SIGTERM was not killed when the context ended")
		}
	}
}

// TestStopWithoutGraceKills: a grace of zero sends no SIGTERM.
func TestStopWithoutGraceKills(t *testing.T) {
	dir := t.TempDir()
	g := tree(t, dir, `trap 'echo > termed; exit 0' TERM; echo > ready; while :; do sleep 0.01; done`, "ready")
	if _, err := stop(context.Background(), 0, g); err != nil {
		t.Errorf("Stop = %v", err)
	}
	if g.Alive() {
		t.Errorf("the group is alive after Stop")
	}
	if _, err := os.Stat(filepath.Join(dir, "termed")); err == nil {
		t.Errorf("a grace of zero sent SIGTERM")
	}
}

// TestStopGroupsShareTheGrace: the graces of several groups run at once.
func TestStopGroupsShareTheGrace(t *testing.T) {
	const grace = 400 * time.Millisecond
	var groups []*Group
	for range 3 {
		dir := t.TempDir()
		groups = append(groups, tree(t, dir, `trap '' TERM; echo > ready; while :; do sleep 0.01; done`, "ready"))
	}
	took, err := stop(context.Background(), grace, groups...)
	if err != nil || took < grace || took > 2*grace {
		t.Errorf("Stop = %v after %v, want nil after one grace of %v for all three", err, took, grace)
	}
}

// TestTerminateSignalsOnce: a second Terminate sends no second SIGTERM,
// and Stop counts the grace from the first.
func TestTerminateSignalsOnce(t *testing.T) {
	dir := t.TempDir()
	g := tree(t, dir, `trap 'echo term >> terms' TERM; echo > ready; while :; do sleep 0.01; done`, "ready")
	if err := g.Terminate(); err != nil {
		t.Fatal(err)
	}
	readLine(t, filepath.Join(dir, "terms"))
	const grace = 300 * time.Millisecond
	time.Sleep(grace)
	if err := g.Terminate(); err != nil {
		t.Fatal(err)
	}
	took, err := stop(context.Background(), grace, g)
	if err != nil || took > grace {
		t.Errorf("Stop = %v after %v, want a kill at once: the grace ran from the first SIGTERM", err, took)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "terms")); bytes.Count(b, []byte("term")) != 1 {
		t.Errorf("the group got SIGTERM %d times, want once", bytes.Count(b, []byte("term")))
	}
}

// TestNoGroup: a pgid of 0 or less signals nothing (kill(2) would take
// the caller's own group, or every process), and is never alive.
func TestNoGroup(t *testing.T) {
	for _, pgid := range []int{0, -1} {
		g := New(pgid)
		if err := g.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("New(%d).Signal = %v, want os.ErrProcessDone", pgid, err)
		}
		if g.Alive() {
			t.Errorf("New(%d) is alive", pgid)
		}
		if err := Stop(context.Background(), time.Second, g); err != nil {
			t.Errorf("Stop(New(%d)) = %v", pgid, err)
		}
	}
}
