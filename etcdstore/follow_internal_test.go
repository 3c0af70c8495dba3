package etcdstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestFollowResumesPastACompaction: a watch cut off while the revisions
// it would resume from are compacted away comes back watching from now:
// it reports the gap once (on(nil)), does not re-open in a tight loop, and
// delivers the next change, even one made at once by the caller the gap
// woke: the gap is reported only once the new watch is confirmed, so a
// waiter that re-reads on the gap and then waits misses nothing. (The
// change is written inside on(nil) itself, which makes the order
// certain: reported before the new watch, the change fell between the two
// and was never delivered; on a busy host that was this test timing out.)
func TestFollowResumesPastACompaction(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	p := etcdtest.NewProxy(t, c.Members[0].Endpoint)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, err := NewBackend(ctx, "etcd://"+p.Endpoint()+"/fc", Options{RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cli := c.Client()
	var gaps, events, seen atomic.Int64
	if err := b.follow(ctx, "test", "/fc/w/", false, func(evs []*clientv3.Event) {
		if evs == nil {
			// What a woken waiter does: look, then count on the watch
			// for anything after.
			gaps.Add(1)
			seen.Store(events.Load())
			if _, err := cli.Put(ctx, "/fc/w/c", "1"); err != nil && ctx.Err() == nil {
				t.Error(err)
			}
		} else {
			events.Add(int64(len(evs)))
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/fc/w/a", "1"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the first event", func() bool { return events.Load() >= 1 })

	// Cut the watcher off; meanwhile write and compact past what it saw.
	p.Cut()
	p.Drop()
	var rev int64
	for i := 0; i < 5; i++ {
		r, err := cli.Put(ctx, "/fc/w/b", "x")
		if err != nil {
			t.Fatal(err)
		}
		rev = r.Header.Revision
	}
	if _, err := cli.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	p.Restore()
	waitUntil(t, "the gap to be reported", func() bool { return gaps.Load() >= 1 })
	waitUntil(t, "an event after the compaction", func() bool { return events.Load() > seen.Load() })
	before := gaps.Load()
	time.Sleep(2 * time.Second)
	if n := gaps.Load() - before; n > 2 {
		t.Fatalf("%d more gaps in 2 s after recovering: the watch is re-opening in a loop", n)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
