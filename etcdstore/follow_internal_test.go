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
// delivers the next change.
func TestFollowResumesPastACompaction(t *testing.T) {
	c := etcdtest.Start(t)
	p := etcdtest.NewProxy(t, c.Members[0].Endpoint)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, err := Open(ctx, "etcd://"+p.Endpoint()+"/fc", Options{RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var gaps, events atomic.Int64
	if err := b.follow(ctx, "test", "/fc/w/", false, func(evs []*clientv3.Event) {
		if evs == nil {
			gaps.Add(1)
		} else {
			events.Add(int64(len(evs)))
		}
	}); err != nil {
		t.Fatal(err)
	}
	cli := c.Client()
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
	seen := events.Load()
	if _, err := cli.Put(ctx, "/fc/w/c", "1"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "an event after the compaction", func() bool { return events.Load() > seen })
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
