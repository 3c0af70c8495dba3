package provision_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/durable-lease/durable-lease/internal/sys/cgroup"
	"github.com/durable-lease/durable-lease/internal/sys/cgroup/cgrouptest"
	"github.com/durable-lease/durable-lease/provision"
)

// Under InCgroup every program of a command starts inside the cgroup: a
// holder's provision, reset and health commands are contained with its
// work.
func TestProgramsStartInTheCgroup(t *testing.T) {
	t.Parallel()
	g, err := cgroup.Create(cgrouptest.Scratch(t), "provision")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var out strings.Builder
	err = provision.Run(provision.InCgroup(context.Background(), g.FD()), provision.Command{
		Script: "grep ^0:: /proc/self/cgroup && sh -c 'grep ^0:: /proc/self/cgroup'", Env: os.Environ(), Stdout: &out, Stderr: &out,
	})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	want := "0::" + g.Ref().Path + "\n"
	if out.String() != want+want {
		t.Errorf("the programs ran in\n%s; want %s twice", out.String(), want)
	}
	if err := g.Remove(); err != nil {
		t.Errorf("the cgroup is not empty after the command: %v", err)
	}
}
