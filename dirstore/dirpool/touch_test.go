//go:build linux

package dirpool

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// TestWaitersTouchInsteadOfRewriting: idle waiters on a held pool touch
// their bells and leave queue.json alone, except for a rewrite now and
// then that carries every touch into it. Each heartbeat rewrote the whole
// queue before: n waiters, n rewrites of n entries every quarter of
// waiterStaleMs. A reader of queue.json alone (the Node tool) must still
// find every entry fresh all the time.
func TestWaitersTouchInsteadOfRewriting(t *testing.T) {
	t.Parallel()
	// waiterStaleMs is what a waiter may go unscheduled before its entry
	// lapses, rightly: 2 s keeps a host loaded by other tests from
	// starving a waiter that long (at 800 ms one did, in CI).
	const stale, poll = 2 * time.Second, 50 * time.Millisecond
	p := newRealPool(t, fmt.Sprintf(`{"name":"p","waiterStaleMs":%d,"slots":[{"id":1}]}`, stale.Milliseconds()), pool.Options{Poll: poll})
	if _, err := p.Acquire(context.Background(), pool.AcquireRequest{Owner: "holder", NoWait: true}); err != nil {
		t.Fatal(err)
	}
	const n = 8
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, n)
	for i := range n {
		go func() {
			_, err := p.Acquire(ctx, pool.AcquireRequest{Owner: fmt.Sprintf("w%d", i), Wait: time.Minute})
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
	for len(queuedEntries(p)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d waiters queued", len(queuedEntries(p)), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A dead waiter's entry, with a bell nobody touches: the waiters'
	// rewrites must not keep it alive.
	dead := lease.FormatTime(p.Store().Now())
	if _, err := dirStateOf(p).UpdateQueue(context.Background(), "ghost", func(live []pool.Entry) ([]pool.Entry, error) {
		return append(live, pool.Entry{ID: "dead1", Owner: "ghost", Session: "ghost", Mode: pool.ModeBlocking, EnqueuedAt: dead, Heartbeat: dead}), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(dirStateOf(p).bellPath("dead1"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Watch queue.json for two waiterStaleMs: each rewrite is a rename
	// of a new file (inode numbers are reused: its mtime tells it apart).
	const window = 2 * stale
	versions := map[[2]int64]bool{}
	lastGhosts := 0
	var oldest time.Duration
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		var sb syscall.Stat_t
		if err := syscall.Stat(dirStateOf(p).queuePath(), &sb); err == nil {
			versions[[2]int64{int64(sb.Ino), sb.Mtim.Nano()}] = true
		}
		q := queuedEntries(p)
		ghost := 0
		for _, e := range q {
			if e.Owner == "ghost" {
				ghost++
				continue
			}
			hb, err := lease.ParseTime(e.Heartbeat)
			if err != nil {
				t.Fatal(err)
			}
			oldest = max(oldest, time.Since(hb))
		}
		if len(q)-ghost != n {
			t.Fatalf("the queue has %d live waiters' entries, want %d (an entry lapsed)", len(q)-ghost, n)
		}
		lastGhosts = ghost
	}
	if lastGhosts != 0 {
		t.Errorf("a dead waiter's entry was still queued after %s (waiterStaleMs %s)", window, stale)
	}
	// Touches every eighth (250 ms here), a rewrite once a stamp is half
	// waiterStaleMs old: at most about five eighths, 1.25 s, and never
	// near waiterStaleMs.
	if touchBeat := max(poll, stale/8); oldest >= stale-touchBeat { // a touching waiter's beat
		t.Errorf("a reader of queue.json alone found an entry %s old (waiterStaleMs %s)", oldest, stale)
	}
	// Heartbeats every quarter of waiterStaleMs, each a rewrite, would
	// be 8 per waiter in the window, 64 in all; touches carried by a
	// rewrite about every half waiterStaleMs make about 5 (more on a
	// loaded host, when several waiters find their stamps old at once).
	if rewrites := len(versions) - 1; rewrites > 3*n {
		t.Errorf("queue.json rewritten %d times in %s by %d idle waiters; want at most %d", rewrites, window, n, 3*n)
	} else {
		t.Logf("%d rewrites in %s by %d idle waiters; oldest stamp seen %s", rewrites, window, n, oldest.Round(time.Millisecond))
	}
}
