//go:build unix

package provision

import (
	"context"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/procgroup"
)

// processes records the process groups of the external programs one Run
// starts, so that a cancelled Run can stop all of them, including those of
// programs that have already exited but left processes behind.
type processes struct {
	grace time.Duration

	mu     sync.Mutex
	groups []*procGroup
}

// add records g, whose program has been started.
func (p *processes) add(g *procGroup) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.groups = append(p.groups, g)
}

// forgetIfEmpty drops g, whose program has exited, if nothing is left in
// its group, so a long script does not accumulate finished groups.
func (p *processes) forgetIfEmpty(g *procGroup) {
	if g.group().Alive() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.groups, g); i >= 0 {
		p.groups = slices.Delete(p.groups, i, i+1)
	}
}

// stop ends every recorded group with [procgroup.Stop]: SIGTERM (unless
// the cancellation sent it already), SIGKILL to what is left once the
// grace since that SIGTERM has passed, and returns when the groups are
// empty (or KillWait after the SIGKILL). Processes that left a group
// themselves (with setsid or setpgid) are beyond its reach.
func (p *processes) stop() {
	p.mu.Lock()
	groups := make([]*procgroup.Group, 0, len(p.groups))
	for _, g := range p.groups {
		groups = append(groups, g.group())
	}
	p.mu.Unlock()
	_ = procgroup.Stop(context.Background(), p.grace, groups...)
}

// procGroup is an external program started in a process group of its own.
type procGroup struct {
	cmd *exec.Cmd

	once sync.Once
	pg   *procgroup.Group
}

// newProcGroup prepares (but does not start) the program at path so that it
// leads a new process group, and so that cancelling ctx sends SIGTERM to
// that group. If the program is still running grace later, os/exec kills it
// and stops waiting for its output.
func newProcGroup(ctx context.Context, path string, grace time.Duration) *procGroup {
	g := &procGroup{cmd: exec.CommandContext(ctx, path)}
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	intoCgroup(g.cmd.SysProcAttr, cgroupOf(ctx))
	// os/exec calls Cancel only once the program has started.
	g.cmd.Cancel = func() error { return g.group().Terminate() }
	// WaitDelay also bounds the wait for output after the program exits, so
	// a background process that inherited Stdout cannot make Wait hang.
	g.cmd.WaitDelay = grace
	return g
}

// group is the program's process group, whose id is the pid of the
// program that leads it. It is called only once the program has started.
func (g *procGroup) group() *procgroup.Group {
	g.once.Do(func() { g.pg = procgroup.New(g.cmd.Process.Pid) })
	return g.pg
}
