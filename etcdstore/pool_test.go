package etcdstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool/pooltest"
)

// TestPoolConformance runs the pool state conformance suite
// (pool/pooltest) on etcd, in real time: queue entries and slot leases
// expire on the cluster.
func TestPoolConformance(t *testing.T) {
	c := etcdtest.Start(t)
	var n atomic.Int64
	open := func(t *testing.T, url string) *lease.Store {
		b, err := etcdstore.Open(context.Background(), url, etcdstore.Options{})
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
		New:         func(t *testing.T) *lease.Store { return open(t, c.URL(fmt.Sprintf("pools/s%d", n.Add(1)))) },
		Client:      func(t *testing.T, s *lease.Store) *lease.Store { return open(t, s.Where()) },
		Pass:        func(t *testing.T, s *lease.Store, d time.Duration) { time.Sleep(d) },
		// The cluster expires a lease at its TTL, rounded up to whole
		// seconds, on the leader's next expiry check.
		Margin: 1500 * time.Millisecond,
	})
}
