//go:build unix

package dirpool

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// The local lock of the queue is a flock on the pool directory itself: a
// process holding it keeps the others out of their queue mutations until
// it lets go, and no file is added to the pool directory for it.
func TestQueueLocalLockIsTheDirectory(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	must(t, os.MkdirAll(tp.Dir(), 0o777))
	f, err := os.Open(tp.Dir())
	must(t, err)
	defer f.Close()
	must(t, unix.Flock(int(f.Fd()), unix.LOCK_EX))

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if unlock, err := dirStateOf(tp.Pool).lockLocal(ctx); !errors.Is(err, context.DeadlineExceeded) {
		if unlock != nil {
			unlock()
		}
		t.Fatalf("lockLocal while another holds the directory's flock = %v, want to wait", err)
	}
	must(t, unix.Flock(int(f.Fd()), unix.LOCK_UN))
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	unlock, err := dirStateOf(tp.Pool).lockLocal(ctx)
	if err != nil {
		t.Fatalf("lockLocal once the flock is free: %v", err)
	}
	// While we hold it, nobody else gets it.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("flock of the directory while lockLocal holds it = %v, want EWOULDBLOCK", err)
	}
	unlock()
}

// After a grant, an async request and a release, the pool directory holds
// the protocol's files and nothing of this implementation's own: the file
// set the Node tool leaves after the same operations.
func TestPoolDirectoryHasOnlyProtocolFiles(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	ctx := context.Background()
	g := tp.mustAcquire(t, "ci-main")
	if _, err := tp.Request(ctx, "agent-7", ""); err != nil {
		t.Fatal(err)
	}
	tp.clock.Advance(time.Minute)
	if _, err := tp.Release(ctx, "1", g.Owner, g.Token, false); err != nil {
		t.Fatal(err)
	}
	var got []string
	must(t, filepath.WalkDir(tp.Dir(), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(tp.Dir(), path)
		if rel != "." && filepath.Dir(rel) != pool.GrantsDir {
			got = append(got, rel)
		}
		return nil
	}))
	slices.Sort(got)
	if want := []string{pool.GrantsDir, pool.LogFile, pool.QueueFile, pool.StatsFile}; !slices.Equal(got, want) {
		t.Errorf("pool directory = %v, want %v", got, want)
	}
}

// A queue lock whose payload names this pool directory the way versions
// with a lock file wrote it ("pool") proves nothing to a process holding
// the directory's flock: such a holder, alive, is waited for.
func TestOlderLockFilePayloadIsNoProof(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	self := lease.Self()
	payload, _ := json.Marshal(map[string]any{
		"pid": self.PID, "host": self.Host, "boot": self.Boot, "pidns": self.PIDNS, "start": self.Start, "pool": tp.Dir(),
	})
	if _, err := tp.Store().Acquire(context.Background(), lease.Request{
		Kind: tp.Config().QueueLockKind, Owner: "older", TTLMinutes: queueLockTTLMinutes, Payload: payload,
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := tp.Acquire(ctx, pool.AcquireRequest{Owner: "agent-7", NoWait: true}); err == nil {
		t.Fatal("Acquire took the queue lock of a live holder of an older version")
	}
	if got := eventsNamed(logEvents(t, tp.Dir()), "queue_lock_recovered"); len(got) != 0 {
		t.Errorf("recovered a live older holder's lock: %v", got)
	}
}
