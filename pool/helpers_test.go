package pool_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/durable-lease/durable-lease/dirstore/dirpool" // a directory store's pools
	"github.com/durable-lease/durable-lease/internal/testkit/storetest"

	"github.com/durable-lease/durable-lease/dirstore"
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

// call is one command the fake runner was asked to run.
type call struct {
	Action provision.Action
	Slot   string
	Script string
}

// fakeRunner records every provision, reset and health call; fail (when
// set) decides each call's result.
type fakeRunner struct {
	mu    sync.Mutex
	calls []call
	fail  func(ctx context.Context, c call) error
}

func (r *fakeRunner) run(ctx context.Context, action provision.Action, s *pool.Slot, script string) error {
	c := call{Action: action, Slot: s.ID, Script: script}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	fail := r.fail
	r.mu.Unlock()
	if fail != nil {
		return fail(ctx, c)
	}
	return nil
}

func (r *fakeRunner) Calls() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

func (r *fakeRunner) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = nil
}

func (r *fakeRunner) SetFail(f func(ctx context.Context, c call) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = f
}

// testPool is a pool over a fresh store with a fake clock and runner.
type testPool struct {
	*pool.Pool
	clock  *fakeClock
	runner *fakeRunner
	root   string // the pool file's directory
	store  string // the store's directory
}

// twoSlotPool is a pool file with commands, a templated grantEnv and two
// numeric slots.
const twoSlotPool = `{
  "provision": "prov --slot",
  "health": "check --slot",
  "grantEnv": {"APP_PORT": "{ports.api}", "DB": "{db}"},
  "slots": [
    {"id": 1, "ports": {"api": 3000, "web": 3001}, "db": "acme_test_1"},
    {"id": 2, "ports": {"api": 3100, "web": 3101}, "db": "acme_test_2"}
  ]
}`

// oneSlotPool has a single slot and commands.
const oneSlotPool = `{
  "provision": "prov --slot",
  "health": "check --slot",
  "slots": [{"id": 1, "db": "acme_test_1"}]
}`

// newTestPool writes poolJSON to <tmp>/pool.json, loads it and opens the
// pool over <tmp>/store with a fake clock at t0 and a recording runner
// (unless opts sets its own).
func newTestPool(t *testing.T, poolJSON string, opts pool.Options) *testPool {
	t.Helper()
	root := t.TempDir()
	file := filepath.Join(root, "pool.json")
	if err := os.WriteFile(file, []byte(poolJSON), 0o666); err != nil {
		t.Fatal(err)
	}
	cfg, err := pool.LoadFile(file)
	if err != nil {
		t.Fatalf("LoadFile: %v", err)
	}
	clk := newFakeClock(t0)
	storeDir := filepath.Join(root, "store")
	st, err := dirstore.Open(storeDir, lease.WithClock(clk))
	if err != nil {
		t.Fatalf("dirstore.Open: %v", err)
	}
	fr := &fakeRunner{}
	if opts.ScriptRunner == nil {
		opts.ScriptRunner = fr.run
	}
	if opts.Poll == 0 {
		opts.Poll = 20 * time.Millisecond
	}
	p, err := pool.Open(st, cfg, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return &testPool{Pool: p, clock: clk, runner: fr, root: root, store: storeDir}
}

// newRealPool writes poolJSON to <tmp>/pool.json and opens the pool over
// <tmp>/store on the real clock, with a recording runner: for tests and
// benchmarks of waiters in real time.
func newRealPool(tb testing.TB, poolJSON string, opts pool.Options) *pool.Pool {
	tb.Helper()
	root := tb.TempDir()
	file := filepath.Join(root, "pool.json")
	if err := os.WriteFile(file, []byte(poolJSON), 0o600); err != nil {
		tb.Fatal(err)
	}
	cfg, err := pool.LoadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := dirstore.Open(filepath.Join(root, "store"))
	if err != nil {
		tb.Fatal(err)
	}
	if opts.ScriptRunner == nil {
		opts.ScriptRunner = (&fakeRunner{}).run
	}
	p, err := pool.Open(st, cfg, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// mustAcquire grants a slot without waiting or fails the test.
func (tp *testPool) mustAcquire(t *testing.T, owner string) *pool.Grant {
	t.Helper()
	g, err := tp.Acquire(context.Background(), pool.AcquireRequest{Owner: owner, NoWait: true})
	if err != nil {
		t.Fatalf("Acquire(%s): %v", owner, err)
	}
	return g
}

// slotState reads a slot's lease state.
func (tp *testPool) slotState(t *testing.T, id string) lease.State {
	t.Helper()
	s, err := tp.Config().SlotByID(id)
	if err != nil {
		t.Fatal(err)
	}
	st, err := tp.Store().Status(context.Background(), s.Kind)
	if err != nil {
		t.Fatal(err)
	}
	return st.State
}

// readJSONFile decodes a file or fails the test.
func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
}

// grantFiles lists the grant files of a pool directory.
func grantFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pool.GrantsDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// readQueue returns every entry of the pool's queue.json, live or silent
// (every test here but the conformance suite runs on a directory store).
func readQueue(p *pool.Pool) []pool.Entry {
	var q struct {
		Entries []pool.Entry `json:"entries"`
	}
	data, err := os.ReadFile(filepath.Join(p.Dir(), pool.QueueFile))
	if err == nil {
		_ = json.Unmarshal(data, &q)
	}
	return q.Entries
}

// grantPath is the grant file of request id.
func grantPath(p *pool.Pool, requestID string) string {
	return filepath.Join(p.Dir(), pool.GrantsDir, requestID+".json")
}

// logEvents reads a pool directory's pool.log as JSON objects.
func logEvents(t *testing.T, dir string) []map[string]any {
	t.Helper()
	return storetest.JSONLines(t, filepath.Join(dir, pool.LogFile))
}
