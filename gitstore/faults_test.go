package gitstore

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// TestHoldThroughAnOutage: a holder on a git remote over smart HTTP keeps
// its lease through a burst of 503s longer than the store's own retries
// (every request refused for six seconds: two heartbeats in a row
// fail) and through pushes that take a second and more, all within
// the TTL's slack; a remote that refuses for good is a loss by the
// holder's deadline, declared before the lease could lapse on the
// remote (the TTL counted from the last confirmed push's start).
func TestHoldThroughAnOutage(t *testing.T) {
	t.Parallel()
	srv, url, _ := httpStore(t)
	clock, err := lease.ClockOf() // the real one: the Hold's timers run on it
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBackend(url, clock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	s, err := lease.New(b)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 0.2 // minutes: 12 s
	acq, err := s.Acquire(bg, lease.Request{Kind: "k", Owner: "holder", TTLMinutes: ttl})
	if err != nil {
		t.Fatal(err)
	}
	var renewals atomic.Int64
	var until atomic.Int64 // the deadline the last renewal gave, unix ns
	h, err := s.Keep(bg, "k", "holder", acq.Record.Token, lease.HoldOptions{
		Acquired: acq.Record, Interval: 500 * time.Millisecond,
		Renewed: func(u time.Time) { renewals.Add(1); until.Store(u.UnixNano()) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	waitRenewals := func(what string, n int64) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); renewals.Load() < n; time.Sleep(20 * time.Millisecond) {
			select {
			case <-h.Done():
				t.Fatalf("%s: the lease was lost: %v", what, h.Err())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no renewal within 20 s", what)
			}
		}
	}
	waitRenewals("before the faults", 2)

	// A burst of 503s: every request refused.
	srv.SetFault(func(*http.Request) (int, bool) { return http.StatusServiceUnavailable, false })
	failed := false
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		failed = failed || errors.Is(h.Failing(), lease.ErrUnavailable)
	}
	srv.SetFault(nil)
	if !failed {
		t.Errorf("no heartbeat failed as unavailable during the 503s: the fault did not bite")
	}
	waitRenewals("after the 503s", renewals.Load()+1)

	// Slow pushes: each receive-pack waits a second before it is served.
	srv.SetFault(func(r *http.Request) (int, bool) {
		if r.Method == http.MethodPost {
			time.Sleep(time.Second)
		}
		return 0, false
	})
	waitRenewals("with slow pushes", renewals.Load()+3)
	srv.SetFault(nil)

	// Refused for good: a loss, at the holder's deadline at the latest.
	srv.SetFault(func(*http.Request) (int, bool) { return http.StatusServiceUnavailable, false })
	select {
	case <-h.Done():
	case <-time.After(time.Duration(ttl*float64(time.Minute)) + 10*time.Second):
		t.Fatal("a remote refusing for good: no loss")
	}
	lostAt := time.Now()
	if err := h.Err(); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Err() = %v, want ErrLost", err)
	}
	// The remote counts the TTL from its clock at the last push's
	// arrival, after the deadline's start: the loss comes no later than
	// the deadline and a loaded host's allowance.
	if d := time.Unix(0, until.Load()).Add(lease.RenewalAllowance); lostAt.After(d) {
		t.Errorf("the loss was declared %s after the holder's deadline", lostAt.Sub(d))
	}
}

// TestRenewalFloor: a git store has a renewal gap (an outage the store
// rides out, then a renewal's fetch and push, and the previous push), two
// round trips and a second longer over smart HTTP, whose holder counts
// its TTL from the read before the push and the server's Date a second
// early; the shortest
// TTL a holder keeps follows from it. Before the store said so it had no
// floor but the directory store's, and a TTL that a restart of the remote
// would end was taken without a word.
func TestRenewalFloor(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url        string
		gap, floor time.Duration
		http       bool
	}{
		{"git+file:///srv/leases.git", 5625 * time.Millisecond, 5880 * time.Millisecond, false},
		{"git+git://127.0.0.1:1/leases.git", 5625 * time.Millisecond, 5880 * time.Millisecond, false},
		{"git+ssh://git@example.invalid/leases.git", 5625 * time.Millisecond, 5880 * time.Millisecond, false},
		{"git+https://example.invalid/leases.git", 7625 * time.Millisecond, 7880 * time.Millisecond, true},
	} {
		b, err := NewBackend(c.url, nil, WithStateDir(""))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		s, err := lease.New(b)
		if err != nil {
			t.Fatal(err)
		}
		floor, why := s.RenewalFloor(bg)
		if floor != c.floor {
			t.Errorf("%s: floor %s (%s), want %s", c.url, floor, why, c.floor)
		}
		if g, ok := lease.Backend(b).(lease.RenewalGapper); !ok {
			t.Errorf("%s: no renewal gap", c.url)
		} else if gap, gwhy := g.RenewalGap(bg); gap != c.gap || !strings.Contains(gwhy, "restarting") || strings.Contains(gwhy, "Date") != c.http {
			t.Errorf("%s: gap %s (%s), want %s", c.url, gap, gwhy, c.gap)
		}
	}
}
