//go:build unix

package provision

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/durable-lease/durable-lease/internal/procgroup"
)

// groupPollInterval is how often a stopping process group is checked for
// remaining members while it is within its grace period.
const groupPollInterval = 10 * time.Millisecond

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
	if g.alive() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.groups, g); i >= 0 {
		p.groups = slices.Delete(p.groups, i, i+1)
	}
}

// stop sends SIGTERM to every recorded group, waits until each is empty or
// its grace period has passed, and sends SIGKILL to those that are not.
// It returns when every group has been signalled.
func (p *processes) stop() {
	p.mu.Lock()
	groups := slices.Clone(p.groups)
	p.mu.Unlock()
	for _, g := range groups {
		_ = g.terminate()
	}
	for _, g := range groups {
		g.stop()
	}
}

// procGroup is an external program started in a process group of its own,
// together with the bookkeeping needed to stop everything in that group.
type procGroup struct {
	cmd   *exec.Cmd
	grace time.Duration

	mu       sync.Mutex
	termSent time.Time // when SIGTERM was first sent to the group; zero before
}

// newProcGroup prepares (but does not start) the program at path so that it
// leads a new process group, and so that cancelling ctx sends SIGTERM to
// that group. If the program is still running grace later, os/exec kills it
// and stops waiting for its output.
func newProcGroup(ctx context.Context, path string, grace time.Duration) *procGroup {
	g := &procGroup{cmd: exec.CommandContext(ctx, path), grace: grace}
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	g.cmd.Cancel = g.terminate
	// WaitDelay also bounds the wait for output after the program exits, so
	// a background process that inherited Stdout cannot make Wait hang.
	g.cmd.WaitDelay = grace
	return g
}

// pgid returns the id of the group, which is the pid of the program that
// leads it, or 0 if the program was never started.
func (g *procGroup) pgid() int {
	if g.cmd.Process == nil {
		return 0
	}
	return g.cmd.Process.Pid
}

// terminate sends SIGTERM to every process in the group, once.
func (g *procGroup) terminate() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.termSent.IsZero() {
		return nil
	}
	g.termSent = time.Now()
	return g.signal(syscall.SIGTERM)
}

// stop makes sure the group got SIGTERM, waits until the group is empty or
// the grace period since that SIGTERM has passed, and then sends SIGKILL to
// whatever is left. Processes that left the group themselves (with setsid or
// setpgid) are beyond its reach.
func (g *procGroup) stop() {
	if g.pgid() <= 0 {
		return
	}
	// The program may have exited before the cancellation, in which case
	// os/exec never called terminate.
	_ = g.terminate()

	g.mu.Lock()
	deadline := g.termSent.Add(g.grace)
	g.mu.Unlock()

	tick := time.NewTicker(groupPollInterval)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		if !g.alive() {
			return
		}
		<-tick.C
	}
	_ = g.signal(syscall.SIGKILL)
}

// alive reports whether a process that is not a zombie is still in the
// group (see [procgroup.Alive]).
func (g *procGroup) alive() bool {
	pgid := g.pgid()
	return pgid > 0 && procgroup.Alive(pgid)
}

// signal sends sig to every process in the group. A group with no processes
// left gives os.ErrProcessDone, as os/exec expects from a Cancel function.
func (g *procGroup) signal(sig syscall.Signal) error {
	pgid := g.pgid()
	if pgid <= 0 {
		// kill(0, sig) would signal our own process group.
		return os.ErrProcessDone
	}
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}
