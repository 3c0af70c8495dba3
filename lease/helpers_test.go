package lease_test

import (
	"path/filepath"
	"testing"

	"github.com/durable-lease/durable-lease/dirstore"
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
	s, err := dirstore.Open(dir, append([]lease.Option{lease.WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s, clk
}

// journalEvents reads the store's reaped.log as generic JSON objects.
func journalEvents(t *testing.T, dir string) []map[string]any {
	t.Helper()
	return storetest.JSONLines(t, filepath.Join(dir, dirstore.JournalName))
}
