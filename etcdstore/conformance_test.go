package etcdstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/lease/leasetest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestConformance runs the backend conformance suite (lease/leasetest) on
// etcd: the same assertions the directory store passes, with expiry
// decided by the cluster (so Lapse waits for it in real time).
func TestConformance(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	var n atomic.Int64
	ttl := etcdtest.MinLeaseTTL
	leasetest.Run(t, leasetest.Harness{
		TTLMinutes: ttl.Minutes(),
		Parallel:   true,
		New: func(t *testing.T) *lease.Store {
			url := c.URL(fmt.Sprintf("conformance/s%d", n.Add(1)))
			b, err := etcdstore.NewBackend(context.Background(), url, etcdstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			s, err := lease.New(b, lease.WithOwnerPattern(`^conf-[a-z0-9]+$`), lease.WithPollInterval(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		// The cluster expires a lease at its TTL (rounded to whole
		// seconds); the margin covers that rounding and the leader's
		// expiry tick.
		Lapse: func(t *testing.T, s *lease.Store) { time.Sleep(ttl + 1500*time.Millisecond) },
		Journal: func(t *testing.T, s *lease.Store) []lease.Event {
			loc, err := etcdstore.ParseURL(s.Where())
			if err != nil {
				t.Fatal(err)
			}
			cli, err := clientv3.New(clientv3.Config{Endpoints: loc.Endpoints, DialTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			resp, err := cli.Get(context.Background(), loc.Prefix+"/journal/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
			if err != nil {
				t.Fatal(err)
			}
			var out []lease.Event
			for _, kv := range resp.Kvs {
				var e struct {
					lease.Event
					Previous json.RawMessage `json:"previous"`
				}
				if err := json.Unmarshal(kv.Value, &e); err != nil {
					t.Fatalf("journal %s: %v", kv.Key, err)
				}
				if len(e.Previous) > 0 {
					e.Event.Previous = lease.DecodeRecord(e.Kind, e.Previous)
				}
				out = append(out, e.Event)
			}
			return out
		},
	})
}
