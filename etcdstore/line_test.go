package etcdstore_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// quiet fails if ch gets a value within d: a wake-up that should not come.
func quiet(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("woken by %s", what)
	case <-time.After(d):
	}
}

// TestLineTurns: a kind's line gives the turn to one waiter at a time, in
// the order they lined up; a place that is deleted (as the cluster does
// when its waiter's etcd lease lapses) passes the turn on.
func TestLineTurns(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	b := open(t, c, etcdstore.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var places []lease.Place
	for range 4 {
		p, err := b.LineUp(ctx, "db")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Leave()
		places = append(places, p)
	}
	turn := func(i int) {
		t.Helper()
		select {
		case err := <-places[i].Turn:
			if err != nil {
				t.Fatalf("waiter %d: %v", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("waiter %d: no turn within 5s", i)
		}
	}
	noTurn := func(i int) {
		t.Helper()
		select {
		case err := <-places[i].Turn:
			t.Fatalf("waiter %d got a turn out of order (%v)", i, err)
		case <-time.After(300 * time.Millisecond):
		}
	}
	turn(0)
	noTurn(1)
	noTurn(2)
	places[0].Leave()
	turn(1)
	noTurn(2)
	// Waiter 2's place lapses: the cluster revokes its etcd lease (as at
	// its TTL), which deletes it; waiter 2 is told it lost its place, and
	// waiter 3 is next when waiter 1 leaves.
	cli := c.Client()
	resp, err := cli.Get(ctx, "/"+testPrefix(t)+"/wait/db/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil || len(resp.Kvs) != 3 {
		t.Fatalf("places: %v, %v", resp.Kvs, err)
	}
	if resp.Kvs[1].Lease == 0 {
		t.Fatal("a place is bound to no etcd lease: a stopped waiter would keep it forever")
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[1].Lease)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-places[2].Turn:
		if err == nil {
			t.Fatal("waiter 2 got a turn after its place lapsed, ahead of waiter 1")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter 2 was not told that its place lapsed")
	}
	noTurn(3)
	places[1].Leave()
	turn(3)
	resp, err = cli.Get(ctx, "/"+testPrefix(t)+"/wait/db/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 1 {
		t.Fatalf("places left: %d, %v", resp.Count, err)
	}
	places[3].Leave()
	resp, err = cli.Get(ctx, "/"+testPrefix(t)+"/wait/db/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("places left after every waiter left: %d, %v", resp.Count, err)
	}
}

// TestWatchEntryWakesTheFrontOnly: the waiter of an entry far back in the
// queue is not woken when entries leave the head, nor by heartbeats; it
// is woken when it enters the front (the first slots+FrontMargin entries),
// and when it could be granted.
func TestWatchEntryWakesTheFrontOnly(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	b := open(t, c, etcdstore.Options{})
	file := t.TempDir() + "/pool.json"
	if err := os.WriteFile(file, []byte(`{"name":"p","slots":[{"id":1}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := pool.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.PoolBackend(cfg, pool.Host{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cli := c.Client()
	g, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	dir := "/" + testPrefix(t) + "/pool/p/queue/"
	const n = 8
	for i := range n {
		id := fmt.Sprintf("e%d", i)
		entry := `{"id":"` + id + `","owner":"x","session":"x","mode":"blocking","enqueuedAt":"2026-01-01T00:00:00.000Z","heartbeat":"2026-01-01T00:00:00.000Z"}`
		if _, err := cli.Put(ctx, dir+id, entry, clientv3.WithLease(g.ID)); err != nil {
			t.Fatal(err)
		}
	}
	w, ok := st.(interface {
		WatchEntry(context.Context, string, []string) (pool.Wakeups, func())
	})
	if !ok {
		t.Fatal("the etcd pool state has no WatchEntry")
	}
	wake, stop := w.WatchEntry(ctx, fmt.Sprintf("e%d", n-1), []string{"pool-p-1"})
	defer stop()
	del := func(i int) {
		t.Helper()
		if _, err := cli.Delete(ctx, fmt.Sprintf("%se%d", dir, i)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // the watch is in place
	if _, err := cli.Put(ctx, dir+"e0", `{"id":"e0","owner":"x","session":"x","mode":"blocking","enqueuedAt":"2026-01-01T00:00:00.000Z","heartbeat":"2026-01-01T00:00:01.000Z"}`, clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	quiet(t, wake.Queue, 300*time.Millisecond, "a heartbeat at the head")
	for i := range 3 { // e7 has 4 entries ahead: still behind the front
		del(i)
	}
	quiet(t, wake.Queue, 300*time.Millisecond, "departures at the head, far ahead")
	del(3) // 3 ahead: in the front
	waitWake(t, wake.Queue, 5*time.Second, "entering the front")
	del(4)
	del(5)
	del(6) // none ahead: it could be granted
	waitWake(t, wake.Queue, 5*time.Second, "reaching the head")
}
