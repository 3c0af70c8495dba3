package cgroup_test

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/cgroup"
	"github.com/durable-lease/durable-lease/internal/sys/cgroup/cgrouptest"
)

// startIn starts sh -c script with its first instruction inside g.
func startIn(t *testing.T, g *cgroup.Group, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: g.FD()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func TestLifecycle(t *testing.T) {
	parent := cgrouptest.Scratch(t)
	g, err := cgroup.Create(parent, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if p, err := g.Populated(); err != nil || p {
		t.Fatalf("new cgroup: populated %v, %v; want empty", p, err)
	}
	// A tree that leaves the process group and session: setsid'd
	// sleepers, as a test runner's detached server would be.
	cmd := startIn(t, g, "setsid sleep 100 & setsid sleep 100 & sleep 100")
	deadline := time.Now().Add(5 * time.Second)
	for {
		procs, err := g.Procs()
		if err != nil {
			t.Fatal(err)
		}
		if len(procs) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("procs = %v; want the shell's three sleepers", procs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if cgroup.Of(cmd.Process.Pid) != g.Ref().Path {
		t.Errorf("the child is in %q, not %q", cgroup.Of(cmd.Process.Pid), g.Ref().Path)
	}
	if err := g.Freeze(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.WaitFrozen(ctx); err != nil {
		t.Fatalf("WaitFrozen: %v", err)
	}
	if err := g.End(5 * time.Second); err != nil {
		t.Fatalf("End: %v", err)
	}
	if p, _ := g.Populated(); p {
		t.Fatal("populated after End")
	}
	// The same path made again is another cgroup.
	ref := g.Ref()
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := cgroup.Open(ref); !errors.Is(err, cgroup.ErrNotFound) {
		t.Fatalf("Open of a removed cgroup = %v; want ErrNotFound", err)
	}
	again, err := cgroup.Create(parent, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := cgroup.Open(ref); !errors.Is(err, cgroup.ErrNotFound) {
		t.Fatalf("Open of a cgroup made again at the same path = %v; want ErrNotFound (ids %d, %d)", err, ref.ID, again.Ref().ID)
	}
	if got, err := cgroup.Open(again.Ref()); err != nil {
		t.Fatalf("Open(%v): %v", again.Ref(), err)
	} else {
		got.Close()
	}
	if err := again.Remove(); err != nil {
		t.Fatal(err)
	}
}

// TestRemoveWithSubgroups: a work may make cgroups of its own below its
// run's (a delegated subtree lets it); Remove takes them all.
func TestRemoveWithSubgroups(t *testing.T) {
	parent := cgrouptest.Scratch(t)
	g, err := cgroup.Create(parent, "run")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	sub := cgrouptest.Sub(t, g.Dir(), "inner")
	cgrouptest.Sub(t, sub, "deeper")
	inner, err := cgroup.OpenDir(sub)
	if err != nil {
		t.Fatal(err)
	}
	startIn(t, inner, "sleep 100")
	inner.Close()
	if p, _ := g.Populated(); !p {
		t.Fatal("a process in a subgroup does not populate the run's cgroup")
	}
	if err := g.End(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := g.Remove(); err != nil {
		t.Fatalf("Remove: %v", err)
	}
}

func TestCreateRefusesBadNames(t *testing.T) {
	parent := cgrouptest.Scratch(t)
	for _, name := range []string{"", "..", "a/b", ".hidden", "cgroup.procs", "x y"} {
		if g, err := cgroup.Create(parent, name); err == nil {
			g.Close()
			t.Errorf("Create(%q) succeeded", name)
		}
	}
	if _, err := cgroup.Create("/tmp", "x"); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("Create outside the hierarchy = %v; want ErrNotFound", err)
	}
}
