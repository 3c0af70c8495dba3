package dirstore

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/testkit/storetest"
	"github.com/durable-lease/durable-lease/lease"
)

// The helpers every store test shares (package storetest).
type fakeClock = storetest.FakeClock

var (
	t0           = storetest.T0
	newFakeClock = storetest.NewFakeClock
	eventsNamed  = storetest.EventsNamed
	mustAcquire  = storetest.MustAcquire
	writeFile    = storetest.WriteFile
	readBytes    = storetest.ReadBytes
	exists       = storetest.Exists
)

// newTestStore opens a store over a fresh directory (not yet created) with
// a fake clock at t0.
func newTestStore(t *testing.T, opts ...lease.Option) (*lease.Store, *fakeClock) {
	t.Helper()
	clk := newFakeClock(t0)
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Open(dir, append([]lease.Option{lease.WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s, clk
}

// recordJSON renders a hand-written valid record for the fake clock's time.
func recordJSON(kind, owner, token string, hb time.Time, ttl float64) string {
	m := map[string]any{
		"v": 1, "kind": kind, "owner": owner, "token": token,
		"heartbeat": lease.FormatTime(hb), "ttlMinutes": ttl, "payload": nil, "acquiredAt": lease.FormatTime(hb),
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// testBackend is newBackend for a test, which fails on an error.
func testBackend(t testing.TB, dir string, clock lease.Clock, g guardConfig) *Backend {
	t.Helper()
	b, err := newBackend(dir, clock, g)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deadPID starts a short-lived child process, waits for it and returns its
// pid, which then names no process (until the kernel reuses it).
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatalf("short child: %v", err)
	}
	return cmd.ProcessState.Pid()
}

var bg = context.Background()

// hexToken matches a fresh token: 32 lower-case hex digits.
var hexToken = regexp.MustCompile(`^[0-9a-f]{32}$`)

// realStore opens a store over a fresh directory on the wall clock, and
// returns its backend too.
func realStore(t *testing.T) (*lease.Store, *Backend) {
	t.Helper()
	b := testBackend(t, filepath.Join(t.TempDir(), "store"), lease.WallClock{}, guardConfig{wait: DefaultGuardWait, stale: DefaultGuardStale})
	s, err := lease.New(b)
	if err != nil {
		t.Fatal(err)
	}
	return s, b
}

// journalEvents reads the store's reaped.log as generic JSON objects.
func journalEvents(t *testing.T, dir string) []map[string]any {
	t.Helper()
	return storetest.JSONLines(t, filepath.Join(dir, JournalName))
}
