//go:build linux

package pool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// TestWaitersTouchInsteadOfRewriting: idle waiters on a held pool touch
// their bells and leave queue.json alone, except for a rewrite now and
// then that carries every touch into it. Each heartbeat rewrote the whole
// queue before: n waiters, n rewrites of n entries every quarter of
// waiterStaleMs. A reader of queue.json alone (the Node tool) must still
// find every entry fresh all the time.
func TestWaitersTouchInsteadOfRewriting(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "pool.json")
	const stale = 800 * time.Millisecond
	if err := os.WriteFile(file, []byte(`{"name":"p","waiterStaleMs":800,"slots":[{"id":1}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	st, err := lease.Open(filepath.Join(root, "store"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Open(st, cfg, Options{Poll: 50 * time.Millisecond, Runner: (&fakeRunner{}).run})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Acquire(context.Background(), AcquireRequest{Owner: "holder", NoWait: true}); err != nil {
		t.Fatal(err)
	}
	const n = 8
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, n)
	for i := range n {
		go func() {
			_, err := p.Acquire(ctx, AcquireRequest{Owner: fmt.Sprintf("w%d", i), Wait: time.Minute})
			done <- err
		}()
	}
	defer func() {
		cancel()
		for range n {
			<-done
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for len(p.readQueue()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d waiters queued", len(p.readQueue()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Watch queue.json for four waiterStaleMs: each rewrite is a rename
	// of a new file (inode numbers are reused: its mtime tells it apart).
	versions := map[[2]int64]bool{}
	var oldest time.Duration
	for end := time.Now().Add(4 * stale); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		var sb syscall.Stat_t
		if err := syscall.Stat(p.dirState().queuePath(), &sb); err == nil {
			versions[[2]int64{int64(sb.Ino), sb.Mtim.Nano()}] = true
		}
		q := p.readQueue()
		if len(q) != n {
			t.Fatalf("the queue has %d entries, want %d (an entry lapsed)", len(q), n)
		}
		for _, e := range q {
			hb, err := lease.ParseTime(e.Heartbeat)
			if err != nil {
				t.Fatal(err)
			}
			oldest = max(oldest, time.Since(hb))
		}
	}
	if oldest >= stale {
		t.Errorf("a reader of queue.json alone found an entry %s old (waiterStaleMs %s)", oldest, stale)
	}
	// Heartbeats every quarter of waiterStaleMs, each a rewrite, would
	// be 16 per waiter in the window, 128 in all.
	if rewrites := len(versions) - 1; rewrites > 2*n {
		t.Errorf("queue.json rewritten %d times in %s by %d idle waiters; want at most %d", rewrites, 4*stale, n, 2*n)
	} else {
		t.Logf("%d rewrites in %s by %d idle waiters; oldest stamp seen %s", rewrites, 4*stale, n, oldest.Round(time.Millisecond))
	}
}
