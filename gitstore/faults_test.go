package gitstore

import (
	"errors"
	"net/http"
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
	b, err := NewBackend(url, Options{}, lease.WithClock(clock))
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
