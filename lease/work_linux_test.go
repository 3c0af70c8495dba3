package lease_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/cgroup"
	"github.com/durable-lease/durable-lease/internal/sys/cgroup/cgrouptest"
	"github.com/durable-lease/durable-lease/lease"
)

// runningWork starts a tree (a setsid'd sleeper beside the shell's) in a
// new cgroup of a scratch parent and returns the record's Work and the
// cgroup.
func runningWork(t *testing.T) (*lease.Work, *cgroup.Group) {
	t.Helper()
	g, err := cgroup.Create(cgrouptest.Scratch(t), "run")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	cmd := exec.Command("sh", "-c", "setsid sleep 300 & exec sleep 300")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: g.FD()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	t.Cleanup(func() { _ = g.Kill() })
	deadline := time.Now().Add(5 * time.Second)
	for procs, _ := g.Procs(); len(procs) < 2; procs, _ = g.Procs() {
		if time.Now().After(deadline) {
			t.Fatalf("the work did not start: %v", procs)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return lease.WorkOn(g.Ref().Path, g.Ref().ID, cgroup.Namespace()), g
}

// acquireWith takes kind k for owner with w as its work, and binds w's
// cgroup g to the incarnation, as pool-run does once it holds the lease.
func acquireWith(t *testing.T, s *lease.Store, owner string, w *lease.Work, g *cgroup.Group) *lease.Acquisition {
	t.Helper()
	acq, err := s.Acquire(context.Background(), lease.Request{Kind: "k", Owner: owner, TTLMinutes: 1, Work: w})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Bind(lease.WorkBinding("k", acq.Record.Token)); err != nil {
		t.Fatal(err)
	}
	return acq
}

func populated(t *testing.T, g *cgroup.Group) bool {
	t.Helper()
	p, err := g.Populated()
	if errors.Is(err, cgroup.ErrNotFound) {
		return false // removed
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Every change that takes a lease from its holder first ends what the
// holder's work left running on this host, and journals it.
func TestChangesOfHandsEndTheHoldersWork(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		take func(t *testing.T, s *lease.Store, clk *fakeClock, rec *lease.Record) error
	}{
		{"force release", func(t *testing.T, s *lease.Store, _ *fakeClock, _ *lease.Record) error {
			_, err := s.ForceRelease(context.Background(), "k", "op")
			return err
		}},
		{"release with the token", func(t *testing.T, s *lease.Store, _ *fakeClock, rec *lease.Record) error {
			_, err := s.Release(context.Background(), lease.Ref{Kind: "k", Owner: rec.Owner, Token: rec.Token})
			return err
		}},
		{"takeover", func(t *testing.T, s *lease.Store, clk *fakeClock, _ *lease.Record) error {
			clk.Advance(2 * time.Minute)
			_, err := s.Acquire(context.Background(), lease.Request{Kind: "k", Owner: "next", TTLMinutes: 1})
			return err
		}},
		{"reap", func(t *testing.T, s *lease.Store, clk *fakeClock, _ *lease.Record) error {
			clk.Advance(2 * time.Minute)
			_, err := s.Reap(context.Background(), "k")
			return err
		}},
		{"replace", func(t *testing.T, s *lease.Store, _ *fakeClock, _ *lease.Record) error {
			_, err := s.Replace(context.Background(), "", lease.Request{Kind: "k", Owner: "next", TTLMinutes: 1})
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, g := runningWork(t)
			s, clk := newTestStore(t)
			acq := acquireWith(t, s, "holder", w, g)
			if got := acq.Record.Work(); got == nil || *got != *w {
				t.Fatalf("the record names work %+v; want %+v", got, w)
			}
			if _, err := s.Heartbeat(context.Background(), lease.Ref{Kind: "k", Owner: "holder", Token: acq.Record.Token}); err != nil || !populated(t, g) {
				t.Fatalf("a heartbeat touched the work: %v, populated %v", err, populated(t, g))
			}
			if err := tt.take(t, s, clk, acq.Record); err != nil {
				t.Fatal(err)
			}
			if populated(t, g) {
				t.Fatal("the holder's work runs on after its lease changed hands")
			}
			if _, err := os.Stat(g.Dir()); !os.IsNotExist(err) {
				t.Errorf("the ended cgroup is still there: %v", err)
			}
			ev := eventsNamed(journalEvents(t, s.Dir()), lease.EventWorkEnded)
			if len(ev) != 1 {
				t.Fatalf("work_ended events = %v; want one", ev)
			}
		})
	}
}

// A record can name only its own writer's cgroup: one planted by another
// user, naming a cgroup that is not that user's, ends nothing.
func TestPlantedWorkIsNotEnded(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to plant a record as another user")
	}
	w, g := runningWork(t)
	s, _ := newTestStore(t)
	acquireWith(t, s, "holder", w, g)
	if err := os.Lchown(filepath.Join(s.Dir(), "k.json"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForceRelease(context.Background(), "k", "op"); err != nil {
		t.Fatal(err)
	}
	if !populated(t, g) {
		t.Fatal("a record written by another user ended a cgroup that is not theirs")
	}
}

// Work on another host (another boot id) is out of reach: nothing is
// ended, and the lease changes hands (the fence is the answer there).
func TestWorkOfAnotherHostIsLeftAlone(t *testing.T) {
	t.Parallel()
	w, g := runningWork(t)
	other := *w
	other.Boot = "00000000-0000-0000-0000-000000000000"
	s, _ := newTestStore(t)
	acquireWith(t, s, "holder", &other, g)
	if _, err := s.ForceRelease(context.Background(), "k", "op"); err != nil {
		t.Fatal(err)
	}
	if !populated(t, g) {
		t.Fatal("work named with another boot id was ended")
	}
}

// A record can name only a cgroup bound to its own incarnation: one that
// names a cgroup never bound (whoever can write the store rewrote the
// record to name it: a service's cgroup, say), or one bound to another
// lease's run, ends nothing, even when its writer is root and so is the
// cgroup's owner (a record rewritten and then heartbeated by root).
func TestOnlyABoundCgroupIsEnded(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		bind func(g *cgroup.Group)
	}{
		{"never bound", func(*cgroup.Group) {}},
		{"another incarnation's", func(g *cgroup.Group) { _ = g.Bind(lease.WorkBinding("k", lease.NewToken())) }},
		{"another kind's", func(g *cgroup.Group) { _ = g.Bind(lease.WorkBinding("other", "x")) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, g := runningWork(t)
			tt.bind(g)
			s, _ := newTestStore(t)
			acq, err := s.Acquire(context.Background(), lease.Request{Kind: "k", Owner: "holder", TTLMinutes: 1, Work: w})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Heartbeat(context.Background(), lease.Ref{Kind: "k", Owner: "holder", Token: acq.Record.Token}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Release(context.Background(), lease.Ref{Kind: "k", Owner: "holder", Token: acq.Record.Token}); err != nil {
				t.Fatal(err)
			}
			if !populated(t, g) {
				t.Fatal("a record ended a cgroup not bound to its incarnation")
			}
		})
	}
}

// An empty cgroup of the holder's, between two of its starts, is removed
// when the lease changes hands: the holder, not yet aware of the loss,
// cannot start its next phase there.
func TestAnEmptyBoundCgroupIsFenced(t *testing.T) {
	t.Parallel()
	g, err := cgroup.Create(cgrouptest.Scratch(t), "run")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	w := lease.WorkOn(g.Ref().Path, g.Ref().ID, cgroup.Namespace())
	s, _ := newTestStore(t)
	acquireWith(t, s, "holder", w, g)
	if _, err := s.ForceRelease(context.Background(), "k", "op"); err != nil {
		t.Fatal(err)
	}
	if !g.Gone() {
		t.Fatal("the holder's empty cgroup is still there after its lease was taken")
	}
}

// A record written in another cgroup namespace (a container sharing the
// store) names its cgroup by a path of that namespace: root reaches it by
// its id instead, and ends it.
func TestWorkOfAnotherCgroupNamespaceIsReachedByID(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only root opens a cgroup by its id")
	}
	w, g := runningWork(t)
	other := *w
	other.Cgroup, other.NS = "/a-path-of-another-namespace", cgroup.Namespace()+1
	s, _ := newTestStore(t)
	acquireWith(t, s, "holder", &other, g)
	if _, err := s.ForceRelease(context.Background(), "k", "op"); err != nil {
		t.Fatal(err)
	}
	if populated(t, g) {
		t.Fatal("the work of another cgroup namespace runs on after its lease changed hands")
	}
}
