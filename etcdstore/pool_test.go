package etcdstore_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
	"github.com/durable-lease/durable-lease/pool/pooltest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestPoolConformance runs the pool state conformance suite
// (pool/pooltest) on etcd, in real time: queue entries and slot leases
// expire on the cluster.
func TestPoolConformance(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	var n atomic.Int64
	open := func(t *testing.T, url string) *lease.Store {
		b, err := etcdstore.NewBackend(context.Background(), url, etcdstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		s, err := lease.New(b, lease.WithOwnerPattern(`^pt-[a-z0-9]+$`), lease.WithPollInterval(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pooltest.Run(t, pooltest.Harness{
		TTLMinutes:  (2 * etcdtest.MinLeaseTTL).Minutes(),
		WaiterStale: 2 * etcdtest.MinLeaseTTL,
		Parallel:    true,
		New:         func(t *testing.T) *lease.Store { return open(t, c.URL(fmt.Sprintf("pools/s%d", n.Add(1)))) },
		Client:      func(t *testing.T, s *lease.Store) *lease.Store { return open(t, s.Where()) },
		Pass:        func(t *testing.T, s *lease.Store, d time.Duration) { time.Sleep(d) },
		// The cluster expires a lease at its TTL, rounded up to whole
		// seconds, on the leader's next expiry check.
		Margin: 1500 * time.Millisecond,
	})
}

// TestLeaselessQueueKeyIsNoEntry: a queue key bound to no etcd lease
// (planted, or restored from a backup) would never lapse and would stand
// first in the queue forever; it is not an entry, and the next change of
// the queue deletes it.
func TestLeaselessQueueKeyIsNoEntry(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	url := c.URL("ghost")
	b, err := etcdstore.NewBackend(context.Background(), url, etcdstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := lease.New(b)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := dir + "/pool.json"
	if err := os.WriteFile(file, []byte(`{"name":"p","slots":[{"id":1}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := pool.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.Open(s, cfg, pool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ghost := `{"id":"ghost1","owner":"x","session":"x","mode":"blocking","enqueuedAt":"2020-01-01T00:00:00.000Z","heartbeat":"2020-01-01T00:00:00.000Z"}`
	cli := c.Client()
	if _, err := cli.Put(context.Background(), "/ghost/pool/p/queue/ghost1", ghost); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := p.Acquire(ctx, pool.AcquireRequest{Owner: "ci-a"})
	if err != nil {
		t.Fatalf("acquire behind a lease-less key: %v", err)
	}
	if g.Slot != 1 && fmt.Sprint(g.Slot) != "1" {
		t.Errorf("granted %v", g.Slot)
	}
	resp, err := cli.Get(context.Background(), "/ghost/pool/p/queue/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 0 {
		t.Errorf("queue keys left: %v, %v", resp.Kvs, err)
	}
}
