//go:build linux

package dirstore

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// pauseAt makes the first goroutine that reaches point in the guard code
// wait there until release is called. reached is closed when it arrives.
func pauseAt(t *testing.T, point string) (reached <-chan struct{}, release func()) {
	t.Helper()
	arrived, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	guardHook = func(p string) {
		if p != point {
			return
		}
		once.Do(func() {
			close(arrived)
			<-resume
		})
	}
	t.Cleanup(func() { guardHook = func(string) {} })
	var rel sync.Once
	return arrived, func() { rel.Do(func() { close(resume) }) }
}

func interleaveBackend(t *testing.T) (*Backend, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return testBackend(t, dir, lease.WallClock{}, guardConfig{wait: 2 * time.Second, stale: DefaultGuardStale}), filepath.Join(dir, ".guard-k")
}

func mustEnter(t *testing.T, b *Backend) *heldGuard {
	t.Helper()
	g, err := b.enterGuard(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGuardHolderLeavesWhileJudged is the interleaving that let two
// processes inside: a reaper reads holder H's file, H leaves, L enters, and
// only then does the reaper look at H's liveness. The reaper must judge
// L's guard live, and a reap acting on the old judgment must not touch it.
func TestGuardHolderLeavesWhileJudged(t *testing.T) {
	b, path := interleaveBackend(t)
	h := mustEnter(t, b)
	reached, release := pauseAt(t, "judge:read")
	verdicts := make(chan verdict, 1)
	go func() { verdicts <- b.judgeGuard(path) }()
	<-reached // the reaper has read H's holder file

	b.leaveGuard(h) // H leaves (and could exit)
	l := mustEnter(t, b)
	defer b.leaveGuard(l)
	release()

	v := <-verdicts
	v.close()
	if v.stale {
		t.Fatalf("the reaper judged L's fresh guard dead: %+v", v)
	}
	if err := b.reapGuard("k", path); err != nil { // acting on a stale judgment anyway
		t.Fatal(err)
	}
	if got := readHolder(path); got == nil || got.ID != l.id {
		t.Fatalf("L's guard was moved or replaced: holder %+v, want id %s", got, l.id)
	}
	if ev := journalEvents(t, b.dir); len(ev) != 0 {
		t.Errorf("journaled %v; want nothing", ev)
	}
}

// TestGuardReapInterleavings pauses a reaper at each step between judging
// a dead holder's guard and removing it, while another process tries to
// enter: exactly one guard is reaped, nothing is lost, and the entrant gets
// in only after the dead guard is gone.
func TestGuardReapInterleavings(t *testing.T) {
	for _, point := range []string{"judge:read", "reap:locked", "reap:judged"} {
		t.Run(point, func(t *testing.T) {
			b, path := interleaveBackend(t)
			dead := mustEnter(t, b)
			dead.lock.Close() // the holder dies: the kernel drops its lock, the guard stays

			reached, release := pauseAt(t, point)
			reaped := make(chan error, 1)
			go func() {
				v := b.judgeGuard(path)
				v.close()
				if !v.stale {
					reaped <- nil
					return
				}
				reaped <- b.reapGuard("k", path)
			}()
			<-reached
			entered := make(chan *heldGuard, 1)
			go func() {
				g, err := b.enterGuard(context.Background(), "k")
				if err != nil {
					t.Error(err)
				}
				entered <- g
			}()
			time.Sleep(50 * time.Millisecond) // let the entrant race the paused reaper
			release()
			if err := <-reaped; err != nil {
				t.Fatal(err)
			}
			g := <-entered
			if g == nil {
				t.FailNow()
			}
			if got := readHolder(path); got == nil || got.ID != g.id {
				t.Fatalf("the entrant's guard is not the one in place: %+v, want id %s", got, g.id)
			}
			b.leaveGuard(g)
			ev := journalEvents(t, b.dir)
			if n := len(eventsNamed(ev, lease.EventGuardReaped)); n != 1 || len(eventsNamed(ev, lease.EventGuardLost)) != 0 {
				t.Errorf("journal %v; want exactly one guard_reaped and no guard_lost", ev)
			}
			assertNoStrays(t, b.dir)
		})
	}
}
