package dirstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

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
	s, err := Open(dir, append([]lease.Option{lease.WithClock(clk)}, opts...)...)
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
	data, err := os.ReadFile(filepath.Join(dir, JournalName))
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

// jsonStrings are strings that exercise every escape of encoding/json.
func jsonStrings() []string {
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
