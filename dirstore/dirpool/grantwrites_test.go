package dirpool

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// tickClock moves a millisecond on at every reading, so that a record
// rewritten after it was written carries a later heartbeat.
type tickClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *tickClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

// TestGrantWithoutCommandsWritesTheSlotOnce: a pool without provision or
// health commands hands out the slot as its acquire wrote it; no
// heartbeat rewrites the record on the way to the grant (three more files
// made under the slot's guard, in every hand-off). With commands, the
// hold that keeps the slot alive through them starts with a heartbeat.
func TestGrantWithoutCommandsWritesTheSlotOnce(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		poolJSON  string
		rewritten bool
	}{
		"no commands": {`{"slots": [{"id": 1}]}`, false},
		"commands":    {oneSlotPool, true},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			cfg := writePoolFile(t, root, tc.poolJSON)
			st, err := dirstore.Open(filepath.Join(root, "store"), lease.WithClock(&tickClock{t: t0}))
			if err != nil {
				t.Fatal(err)
			}
			p, err := pool.Open(st, cfg, pool.Options{ScriptRunner: noScript})
			if err != nil {
				t.Fatal(err)
			}
			g, err := p.Acquire(context.Background(), pool.AcquireRequest{Owner: "agent-7", NoWait: true})
			if err != nil {
				t.Fatal(err)
			}
			s, err := st.Status(context.Background(), g.Kind)
			if err != nil || s.Record == nil {
				t.Fatalf("Status = %+v, %v", s, err)
			}
			if got := s.Record.Heartbeat.After(s.Record.AcquiredAt); got != tc.rewritten {
				t.Errorf("heartbeat %s after acquiredAt %s = %v, want %v", s.Record.Heartbeat, s.Record.AcquiredAt, got, tc.rewritten)
			}
		})
	}
}
