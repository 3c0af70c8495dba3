package dirpool_test

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/internal/testkit/storetest"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool/pooltest"
)

// TestPoolConformance runs the pool state conformance suite on the
// directory store, on a fake clock shared by every client of a store.
func TestPoolConformance(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	clocks := map[string]*storetest.FakeClock{}
	open := func(t *testing.T, dir string) *lease.Store {
		mu.Lock()
		c := clocks[dir]
		if c == nil {
			c = storetest.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
			clocks[dir] = c
		}
		mu.Unlock()
		s, err := dirstore.Open(dir, lease.WithClock(c), lease.WithOwnerPattern(`^pt-[a-z0-9]+$`),
			lease.WithPollInterval(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pooltest.Run(t, pooltest.Harness{
		TTLMinutes:  1,
		WaiterStale: 90 * time.Second,
		Parallel:    true, // a clock per store directory
		New:         func(t *testing.T) *lease.Store { return open(t, filepath.Join(t.TempDir(), "store")) },
		Client:      func(t *testing.T, s *lease.Store) *lease.Store { return open(t, s.Dir()) },
		Pass: func(t *testing.T, s *lease.Store, d time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			clocks[s.Dir()].Advance(d)
		},
		Margin: time.Millisecond,
	})
}
