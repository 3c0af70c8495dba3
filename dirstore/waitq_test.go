//go:build unix

package dirstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/procfs"
	"github.com/durable-lease/durable-lease/lease"
	"golang.org/x/sys/unix"
)

func openRealStore(t *testing.T, opts ...lease.Option) *lease.Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "store"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Many waiters in line: every release hands the lease to exactly one of
// them, every one is served, and the line leaves one regular, empty wait
// file that readers skip.
func TestAcquireWaitLineServesEveryWaiter(t *testing.T) {
	s := openRealStore(t)
	ctx := context.Background()
	rec := mustAcquire(t, s, "k", "holder", 10)
	const n = 12
	type won struct {
		owner, token string
		err          error
	}
	got := make(chan won, n)
	for i := 0; i < n; i++ {
		go func() {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			acq, err := s.AcquireWait(ctx, lease.Request{Kind: "k", Owner: fmt.Sprintf("w%d", i), TTLMinutes: 10})
			if err != nil {
				got <- won{err: err}
				return
			}
			got <- won{owner: acq.Record.Owner, token: acq.Record.Token}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	owner, token := rec.Owner, rec.Token
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		if _, err := s.Release(ctx, lease.Ref{Kind: "k", Owner: owner, Token: token}); err != nil {
			t.Fatal(err)
		}
		var w won
		select {
		case w = <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("hand-off %d: no waiter took the lease", i)
		}
		if w.err != nil {
			t.Fatalf("hand-off %d: %v", i, w.err)
		}
		if seen[w.owner] {
			t.Fatalf("%s served twice", w.owner)
		}
		seen[w.owner] = true
		select {
		case extra := <-got:
			t.Fatalf("two holders after one release: %s and %s (%v)", w.owner, extra.owner, extra.err)
		case <-time.After(20 * time.Millisecond):
		}
		owner, token = w.owner, w.token
	}
	fi, err := os.Lstat(filepath.Join(s.Dir(), waitFileName("k")))
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
		t.Fatalf("wait file: %v %v", fi, err)
	}
	names, err := s.Backend().Names(context.Background())
	if err != nil || len(names) != 1 || names[0] != "k" {
		t.Fatalf("Names = %v, %v; want only k", names, err)
	}
}

// A free lease is taken without creating the wait file.
func TestAcquireWaitFreeMakesNoWaitFile(t *testing.T) {
	s := openRealStore(t)
	if _, err := s.AcquireWait(context.Background(), lease.Request{Kind: "k", Owner: "a", TTLMinutes: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(s.Dir(), waitFileName("k"))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("wait file created for an uncontended acquire: %v", err)
	}
}

// A waiter behind the head (blocked in flock) still ends promptly when its
// context is cancelled or its deadline passes, and the head still gets the
// lease afterwards.
func TestAcquireWaitLineCancelBehindHead(t *testing.T) {
	s := openRealStore(t)
	ctx := context.Background()
	rec := mustAcquire(t, s, "k", "holder", 10)
	headDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		_, err := s.AcquireWait(ctx, lease.Request{Kind: "k", Owner: "head", TTLMinutes: 10})
		headDone <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := s.AcquireWait(cctx, lease.Request{Kind: "k", Owner: "behind", TTLMinutes: 10})
	if !errors.Is(err, context.Canceled) || time.Since(start) > 150*time.Millisecond {
		t.Fatalf("cancelled waiter: %v after %s", err, time.Since(start))
	}
	dctx, dcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer dcancel()
	start = time.Now()
	_, err = s.AcquireWait(dctx, lease.Request{Kind: "k", Owner: "behind", TTLMinutes: 10})
	var held *lease.HeldError
	if !errors.As(err, &held) || !errors.Is(err, lease.ErrTimeout) || !held.Timeout || time.Since(start) > 150*time.Millisecond {
		t.Fatalf("timed-out waiter: %v after %s", err, time.Since(start))
	}
	if _, err := s.Release(ctx, lease.Ref{Kind: "k", Owner: rec.Owner, Token: rec.Token}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-headDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the head never got the lease")
	}
}

// A head that never takes its turn (stopped, or another process holding
// the wait file's lock forever) does not keep a free lease from the
// waiters behind it: they find it free and race for it.
func TestAcquireWaitLineStuckHead(t *testing.T) {
	s := openRealStore(t, lease.WithPollInterval(20*time.Millisecond))
	ctx := context.Background()
	rec := mustAcquire(t, s, "k", "holder", 10)
	f, err := os.OpenFile(filepath.Join(s.Dir(), waitFileName("k")), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := s.AcquireWait(ctx, lease.Request{Kind: "k", Owner: "w", TTLMinutes: 10})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := s.Release(ctx, lease.Ref{Kind: "k", Owner: rec.Owner, Token: rec.Token}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a stuck head kept the free lease from the waiter behind it")
	}
}

// A wait file that is not a regular file (a symlink, a FIFO) is never
// opened through; the waiter waits without a line and is still woken by a
// release.
func TestAcquireWaitHostileWaitFile(t *testing.T) {
	for _, what := range []string{"symlink", "fifo"} {
		t.Run(what, func(t *testing.T) {
			s := openRealStore(t)
			ctx := context.Background()
			rec := mustAcquire(t, s, "k", "holder", 10)
			path := filepath.Join(s.Dir(), waitFileName("k"))
			target := filepath.Join(t.TempDir(), "outside")
			switch what {
			case "symlink":
				if err := os.Symlink(target, path); err != nil {
					t.Fatal(err)
				}
			case "fifo":
				if err := unix.Mkfifo(path, 0o666); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			wg.Add(1)
			var werr error
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				_, werr = s.AcquireWait(ctx, lease.Request{Kind: "k", Owner: "w", TTLMinutes: 10})
			}()
			time.Sleep(50 * time.Millisecond)
			start := time.Now()
			if _, err := s.Release(ctx, lease.Ref{Kind: "k", Owner: rec.Owner, Token: rec.Token}); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if werr != nil || time.Since(start) > time.Second {
				t.Fatalf("waiter: %v after %s", werr, time.Since(start))
			}
			if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("something was created through the %s: %v", what, err)
			}
		})
	}
}

// TestAbandonedWaitsLeaveNothingBehind: waiters behind the head that give
// up (a timeout) must not leave a descriptor or a thread blocked behind a
// head that may wait as long as the lease is held.
func TestAbandonedWaitsLeaveNothingBehind(t *testing.T) {
	s, _ := realStore(t)
	mustAcquire(t, s, "k", "holder", 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	headDone := make(chan struct{})
	go func() {
		defer close(headDone)
		_, _ = s.AcquireWait(ctx, lease.Request{Kind: "k", Owner: "head", TTLMinutes: 1})
	}()
	time.Sleep(50 * time.Millisecond) // the head holds the line
	fds := func() int { f, _ := procfs.OpenFiles(os.Getpid()); return len(f) }
	before := fds()
	for range 100 {
		wctx, wcancel := context.WithTimeout(context.Background(), time.Millisecond)
		_, _ = s.AcquireWait(wctx, lease.Request{Kind: "k", Owner: "w", TTLMinutes: 1})
		wcancel()
	}
	time.Sleep(50 * time.Millisecond) // let the abandoned tries notice
	if after := fds(); after > before+5 {
		t.Errorf("100 abandoned waits left %d descriptors open (%d before)", after-before, before)
	}
	cancel()
	<-headDone
}
