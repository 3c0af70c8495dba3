package dirstore_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/internal/testkit/storetest"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/lease/leasetest"
)

// TestConformanceDirectory runs the backend conformance suite against the
// directory store on a fake clock.
func TestConformanceDirectory(t *testing.T) {
	clocks := map[*lease.Store]*storetest.FakeClock{}
	var mu sync.Mutex
	leasetest.Run(t, leasetest.Harness{
		TTLMinutes: 1,
		Parallel:   true, // a clock per store
		New: func(t *testing.T) *lease.Store {
			c := storetest.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
			s, err := dirstore.Open(filepath.Join(t.TempDir(), "store"), lease.WithClock(c),
				lease.WithOwnerPattern(`^conf-[a-z0-9]+$`), lease.WithPollInterval(20*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			clocks[s] = c
			mu.Unlock()
			return s
		},
		Lapse: func(t *testing.T, s *lease.Store) {
			mu.Lock()
			defer mu.Unlock()
			clocks[s].Advance(61 * time.Second)
		},
		Journal: func(t *testing.T, s *lease.Store) []lease.Event {
			f, err := os.Open(filepath.Join(s.Dir(), dirstore.JournalName))
			if os.IsNotExist(err) {
				return nil
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var out []lease.Event
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				var e struct {
					lease.Event
					Previous json.RawMessage `json:"previous"`
				}
				if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
					t.Fatalf("journal line %q: %v", sc.Text(), err)
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
