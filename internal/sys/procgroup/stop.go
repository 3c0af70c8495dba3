//go:build unix

package procgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// PollInterval is how often [Stop] looks whether a group still has live
// members: often enough that a group which exits on SIGTERM is seen empty
// within a few milliseconds, rarely enough that the scan of /proc behind
// [Alive] costs little while a grace runs.
const PollInterval = 10 * time.Millisecond

// KillWait bounds the wait after SIGKILL. A killed process is gone within
// milliseconds unless the kernel holds it (uninterruptible sleep on a
// hung disk or NFS mount); waiting on beyond this would tie the caller to
// such a process, which nothing can end sooner anyway.
const KillWait = 2 * time.Second

// ErrSurvived reports a group that still had live members [KillWait]
// after SIGKILL.
var ErrSurvived = errors.New("procgroup: processes survived SIGKILL")

// Group is a process group: the processes whose process group id is that
// of the program that leads it (its pid), including those it left behind
// when it exited, but not those that moved to a group or session of their
// own (setpgid, setsid). Its methods are safe for concurrent use.
type Group struct {
	pgid int

	mu     sync.Mutex
	termAt time.Time // when Terminate first sent SIGTERM; zero before
}

// New returns the process group pgid. A pgid of 0 or less names no group:
// the group's methods signal nothing (kill(2) would take 0 for the
// caller's own group and -1 for every process it may signal), and the
// group is never alive.
func New(pgid int) *Group { return &Group{pgid: pgid} }

// ID is the process group id given to [New].
func (g *Group) ID() int { return g.pgid }

// Signal sends sig to every process of the group. A group with no process
// left, or no group at all, gives os.ErrProcessDone, as os/exec expects
// from an exec.Cmd's Cancel.
func (g *Group) Signal(sig syscall.Signal) error {
	if g.pgid <= 0 {
		return os.ErrProcessDone
	}
	err := syscall.Kill(-g.pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// Terminate sends SIGTERM to the group, then SIGCONT, so that a member
// stopped by a signal acts on the SIGTERM too rather than sleep through
// its grace. Only the first call signals, and [Stop] counts the group's
// grace from it; later calls return nil. It may serve as an exec.Cmd's
// Cancel (see [Group.Signal] for what it returns).
func (g *Group) Terminate() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.termAt.IsZero() {
		return nil
	}
	g.termAt = time.Now()
	err := g.Signal(syscall.SIGTERM)
	_ = g.Signal(syscall.SIGCONT)
	return err
}

// Alive reports whether a process other than a zombie is in the group
// (see the package function [Alive]).
func (g *Group) Alive() bool { return g.pgid > 0 && Alive(g.pgid) }

// terminated is when the group was first sent SIGTERM, zero if never.
func (g *Group) terminated() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.termAt
}

// Stop ends every process of the groups, and returns once none is left:
//
//  1. each group gets [Group.Terminate] (SIGTERM and SIGCONT), unless it
//     already had it;
//  2. a group still not empty when grace has passed since its own
//     SIGTERM gets SIGKILL (Stop looks every [PollInterval]; the groups'
//     graces run at the same time, not one after the other);
//  3. Stop waits up to [KillWait] after its SIGKILL for each such group
//     to be empty.
//
// A group seen empty is never signalled again: its id may be a new
// group's by then.
//
// It returns nil when every group is empty, and an error wrapping
// [ErrSurvived] that names the groups still alive after KillWait. A grace
// of zero or less skips the SIGTERM: SIGKILL at once. When ctx is done
// before the groups are empty, the rest of the grace is cut short: every
// group still alive gets SIGKILL at once, and Stop returns ctx.Err()
// without waiting for the kills to land.
//
// Zombies do not count as members (see [Alive]); processes that left the
// groups (setsid, setpgid) are beyond Stop's reach.
func Stop(ctx context.Context, grace time.Duration, groups ...*Group) error {
	type stopping struct {
		g      *Group
		done   bool      // seen empty: never signalled again, as its id may be reused
		killed time.Time // when it got SIGKILL; zero before
	}
	all := make([]stopping, len(groups))
	for i, g := range groups {
		all[i].g = g
		if grace > 0 {
			_ = g.Terminate()
		}
	}
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		now, left := time.Now(), 0
		var survived []int
		for i := range all {
			s := &all[i]
			if s.done {
				continue
			}
			if !s.g.Alive() {
				s.done = true
				continue
			}
			left++
			switch {
			case s.killed.IsZero() && (grace <= 0 || !now.Before(s.g.terminated().Add(grace))):
				_ = s.g.Signal(syscall.SIGKILL)
				s.killed = now
			case !s.killed.IsZero() && now.Sub(s.killed) >= KillWait:
				survived = append(survived, s.g.pgid)
			}
		}
		switch {
		case left == 0:
			return nil
		case len(survived) == left:
			return fmt.Errorf("%w: process groups %v", ErrSurvived, survived)
		}
		select {
		case <-ctx.Done():
			for i := range all {
				if s := &all[i]; !s.done && s.killed.IsZero() {
					_ = s.g.Signal(syscall.SIGKILL)
				}
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}
