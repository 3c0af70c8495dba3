package lease_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/lease"
)

// fakeClock is a Clock that moves only when told to, so expiry is tested
// without sleeping.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// t0 is the fake clock's starting instant: millisecond-aligned, like the
// timestamps records store.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)

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

// mustAcquire acquires or fails the test.
func mustAcquire(t *testing.T, s *lease.Store, kind, owner string, ttl float64) *lease.Record {
	t.Helper()
	acq, err := s.Acquire(context.Background(), lease.Request{Kind: kind, Owner: owner, TTLMinutes: ttl})
	if err != nil {
		t.Fatalf("Acquire(%s, %s): %v", kind, owner, err)
	}
	return acq.Record
}

// writeFile writes a file into the store directory, creating it.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o666); err != nil {
		t.Fatal(err)
	}
	return p
}

func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err == nil {
		return true
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("lstat %s: %v", path, err)
	}
	return false
}

// journalEvents reads reaped.log as generic JSON objects (none if absent).
func journalEvents(t *testing.T, dir string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, dirstore.JournalName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("journal line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// eventsNamed filters journal events by their "event" field.
func eventsNamed(events []map[string]any, name string) []map[string]any {
	var out []map[string]any
	for _, e := range events {
		if e["event"] == name {
			out = append(out, e)
		}
	}
	return out
}
