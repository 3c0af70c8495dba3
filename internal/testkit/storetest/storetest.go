// Package storetest holds what the tests of the lease, store and pool
// packages share: a clock that moves only when told to, and readers of a
// store's files that fail the test instead of returning errors. Only
// tests import it.
package storetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// FakeClock is a [lease.Clock] that moves only when told to, so expiry
// and staleness are tested without sleeping.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a clock reading t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// Now is the clock's reading.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// T0 is the fake clocks' starting instant: millisecond-aligned, like the
// timestamps records store.
var T0 = time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)

// MustAcquire acquires kind for owner for ttl minutes or fails the test.
func MustAcquire(t *testing.T, s *lease.Store, kind, owner string, ttl float64) *lease.Record {
	t.Helper()
	acq, err := s.Acquire(context.Background(), lease.Request{Kind: kind, Owner: owner, TTLMinutes: ttl})
	if err != nil {
		t.Fatalf("Acquire(%s, %s): %v", kind, owner, err)
	}
	return acq.Record
}

// WriteFile writes content to dir/name, making dir, and returns the path.
func WriteFile(t *testing.T, dir, name, content string) string {
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

// ReadBytes reads a file or fails the test.
func ReadBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}

// Exists reports whether anything is at path (a link is not followed).
func Exists(t *testing.T, path string) bool {
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

// JSONLines reads a file of JSON lines (a journal, a pool's log) as
// generic objects: none when the file is missing.
func JSONLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: line %q is not JSON: %v", path, sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// EventsNamed filters events by their "event" field.
func EventsNamed(events []map[string]any, name string) []map[string]any {
	var out []map[string]any
	for _, e := range events {
		if e["event"] == name {
			out = append(out, e)
		}
	}
	return out
}

// JSONStrings are strings that exercise every escape of encoding/json.
func JSONStrings() []string {
	s := []string{"", "a", "agent-7", `"quoted"`, `back\slash`, "<tag>&amp;", "line\nbreak\r\t\b\f", "\x00\x01\x1f\x7f",
		"caf\u00e9", "\u2028\u2029", "bad \xff utf8 \xc3", "emoji \U0001F600", "mixed <\u2028\xfe\"\\>"}
	for c := 0; c < 256; c++ {
		s = append(s, string([]byte{byte(c)}), "x"+string([]byte{byte(c)})+"y")
	}
	r := rand.New(rand.NewPCG(3, 4))
	for n := 0; n < 500; n++ {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		s = append(s, string(b))
	}
	return s
}
