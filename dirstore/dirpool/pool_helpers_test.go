package dirpool

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/internal/testkit/storetest"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
	"github.com/durable-lease/durable-lease/provision"
)

// The helpers every store test shares (package storetest).
type fakeClock = storetest.FakeClock

var (
	t0           = storetest.T0
	newFakeClock = storetest.NewFakeClock
	eventsNamed  = storetest.EventsNamed
)

// The tests of a pool's files: a pool over a fresh directory store, on a
// fake clock, whose provision, reset and health commands do nothing.

// oneSlotPool has a single slot and commands.
const oneSlotPool = `{
  "provision": "prov --slot",
  "health": "check --slot",
  "slots": [{"id": 1, "db": "acme_test_1"}]
}`

// testPool is a pool over a fresh store with a fake clock.
type testPool struct {
	*pool.Pool
	clock *fakeClock
	store string // the store's directory
}

// noScript is a script runner that runs nothing and succeeds.
func noScript(context.Context, provision.Action, *pool.Slot, string) error { return nil }

// writePoolFile writes poolJSON to <root>/pool.json and loads it.
func writePoolFile(tb testing.TB, root, poolJSON string) *pool.Config {
	tb.Helper()
	file := filepath.Join(root, "pool.json")
	if err := os.WriteFile(file, []byte(poolJSON), 0o600); err != nil {
		tb.Fatal(err)
	}
	cfg, err := pool.LoadFile(file)
	if err != nil {
		tb.Fatalf("LoadFile: %v", err)
	}
	return cfg
}

// newTestPool opens the pool poolJSON describes over <tmp>/store with a
// fake clock at t0.
func newTestPool(t *testing.T, poolJSON string, opts pool.Options) *testPool {
	t.Helper()
	root := t.TempDir()
	cfg := writePoolFile(t, root, poolJSON)
	clk := newFakeClock(t0)
	storeDir := filepath.Join(root, "store")
	st, err := dirstore.Open(storeDir, lease.WithClock(clk))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if opts.ScriptRunner == nil {
		opts.ScriptRunner = noScript
	}
	if opts.Poll == 0 {
		opts.Poll = 20 * time.Millisecond
	}
	p, err := pool.Open(st, cfg, opts)
	if err != nil {
		t.Fatalf("pool.Open: %v", err)
	}
	return &testPool{Pool: p, clock: clk, store: storeDir}
}

// newRealPool is newTestPool on the real clock, for tests of waiters in
// real time.
func newRealPool(tb testing.TB, poolJSON string, opts pool.Options) *pool.Pool {
	tb.Helper()
	root := tb.TempDir()
	cfg := writePoolFile(tb, root, poolJSON)
	st, err := dirstore.Open(filepath.Join(root, "store"))
	if err != nil {
		tb.Fatal(err)
	}
	if opts.ScriptRunner == nil {
		opts.ScriptRunner = noScript
	}
	p, err := pool.Open(st, cfg, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// dirStateOf is the pool's directory state.
func dirStateOf(p *pool.Pool) *dirState { return p.Backend().(*dirState) }

// mustAcquire grants a slot without waiting or fails the test.
func (tp *testPool) mustAcquire(t *testing.T, owner string) *pool.Grant {
	t.Helper()
	g, err := tp.Acquire(context.Background(), pool.AcquireRequest{Owner: owner, NoWait: true})
	if err != nil {
		t.Fatalf("Acquire(%s): %v", owner, err)
	}
	return g
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// logEvents reads a pool directory's pool.log as JSON objects.
func logEvents(t *testing.T, dir string) []map[string]any {
	t.Helper()
	return storetest.JSONLines(t, filepath.Join(dir, pool.LogFile))
}

// queuedEntries is every entry queue.json holds, live or not (none when
// it cannot be read).
func queuedEntries(p *pool.Pool) []pool.Entry {
	entries, _, _ := dirStateOf(p).entries()
	return entries
}
