package lease_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/lease"
)

// flakyBackend fails the next n mutations, to stand for a busy guard or a
// full disk without waiting for either.
type flakyBackend struct {
	lease.Backend
	fail        atomic.Int32
	unavailable atomic.Bool // fail as a store that cannot be reached
}

var (
	errFlaky       = errors.New("injected failure")
	errUnreachable = fmt.Errorf("%w: injected: no answer", lease.ErrUnavailable)
)

func (b *flakyBackend) Update(ctx context.Context, kind string, fn func(*lease.Record) (lease.Change, error)) (*lease.Record, error) {
	if b.fail.Add(-1) >= 0 {
		if b.unavailable.Load() {
			return nil, errUnreachable
		}
		return nil, errFlaky
	}
	b.fail.Store(0)
	return b.Backend.Update(ctx, kind, fn)
}

// realStore is a store on the real clock: a Hold's timers run on real time.
func realStore(t *testing.T) (*lease.Store, *flakyBackend) {
	t.Helper()
	b, err := dirstore.NewBackend(filepath.Join(t.TempDir(), "store"), dirstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fb := &flakyBackend{Backend: b}
	s, err := lease.New(fb)
	if err != nil {
		t.Fatal(err)
	}
	return s, fb
}

// ttl300ms is a TTL in minutes short enough to lapse within a test.
const ttl300ms = 0.005

func keep(t *testing.T, s *lease.Store, rec *lease.Record, o lease.HoldOptions) *lease.Hold {
	t.Helper()
	h, err := s.Keep(context.Background(), rec.Kind, rec.Owner, rec.Token, o)
	if err != nil {
		t.Fatalf("Keep: %v", err)
	}
	t.Cleanup(h.Stop)
	return h
}

func waitDone(t *testing.T, h *lease.Hold, within time.Duration) error {
	t.Helper()
	select {
	case <-h.Done():
		return h.Err()
	case <-time.After(within):
		t.Fatalf("the hold did not report a loss within %s", within)
		return nil
	}
}

func TestHoldKeepsTheLeaseAlive(t *testing.T) {
	t.Parallel()
	s, _ := realStore(t)
	rec := mustAcquire(t, s, "k", "o", ttl300ms)
	h := keep(t, s, rec, lease.HoldOptions{})
	if h.Interval() != 37500*time.Microsecond {
		t.Errorf("default interval = %s, want TTL/8 = 37.5ms", h.Interval())
	}
	time.Sleep(1 * time.Second) // more than three TTLs
	st, err := s.Status(context.Background(), "k")
	if err != nil || st.State != lease.Held || st.Record.Token != rec.Token {
		t.Fatalf("after three TTLs under a hold: %+v, %v; want held with the same token", st, err)
	}
	if !st.Record.Heartbeat.After(rec.Heartbeat) || !h.Record().Heartbeat.After(rec.Heartbeat) {
		t.Errorf("heartbeat did not advance")
	}
	select {
	case <-h.Done():
		t.Fatalf("lost: %v", h.Err())
	default:
	}
}

func TestHoldReportsDefiniteLoss(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		steal func(s *lease.Store)
		want  error
	}{
		{"forced release", func(s *lease.Store) { _, _ = s.ForceRelease(context.Background(), "k", "op") }, lease.ErrNotHeld},
		// Taken over in one change, as a successor does: a force-release
		// followed by an acquire leaves a window in which the next
		// heartbeat finds no record at all (ErrNotHeld), and under load
		// the 20 ms heartbeat lands in it.
		{"taken over", func(s *lease.Store) {
			if _, err := s.Replace(context.Background(), "", lease.Request{Kind: "k", Owner: "thief", TTLMinutes: 1}); err != nil {
				t.Errorf("Replace: %v", err)
			}
		}, lease.ErrNotOwner},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := realStore(t)
			rec := mustAcquire(t, s, "k", "o", 1)
			h := keep(t, s, rec, lease.HoldOptions{Interval: 20 * time.Millisecond})
			tt.steal(s)
			err := waitDone(t, h, 5*time.Second)
			if !errors.Is(err, lease.ErrLost) || !errors.Is(err, tt.want) {
				t.Fatalf("Err() = %v, want ErrLost and %v", err, tt.want)
			}
			if n := strings.Count(err.Error(), "lease: "); n != 1 {
				t.Errorf("Err() = %q says \"lease: \" %d times, want once", err, n)
			}
			if rerr := h.Release(context.Background()); !errors.Is(rerr, lease.ErrLost) {
				t.Errorf("Release after a loss = %v, want the loss", rerr)
			}
			if tt.want == lease.ErrNotOwner {
				if st, _ := s.Status(context.Background(), "k"); st.State != lease.Held || st.Record.Owner != "thief" {
					t.Errorf("release after loss touched the successor: %+v", st)
				}
			}
		})
	}
}

func TestHoldLosesALeaseThatLapses(t *testing.T) {
	t.Parallel()
	s, _ := realStore(t)
	rec := mustAcquire(t, s, "k", "o", ttl300ms)
	start := time.Now()
	h := keep(t, s, rec, lease.HoldOptions{Interval: time.Hour})
	err := waitDone(t, h, 5*time.Second)
	if !errors.Is(err, lease.ErrLost) || !errors.Is(err, lease.ErrExpired) {
		t.Fatalf("Err() = %v, want ErrLost and ErrExpired", err)
	}
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Errorf("declared lost after %s, before the TTL", el)
	}
}

func TestHoldRetriesOnceThenLoses(t *testing.T) {
	t.Parallel()
	s, fb := realStore(t)
	rec := mustAcquire(t, s, "k", "o", 1)
	h := keep(t, s, rec, lease.HoldOptions{Interval: 30 * time.Millisecond, RetryPause: 10 * time.Millisecond})

	fb.fail.Store(1) // one failure: the retry gets through
	time.Sleep(200 * time.Millisecond)
	select {
	case <-h.Done():
		t.Fatalf("one failed heartbeat was a loss: %v", h.Err())
	default:
	}

	fb.fail.Store(2) // two in a row: lost
	err := waitDone(t, h, 5*time.Second)
	if !errors.Is(err, lease.ErrLost) || !errors.Is(err, errFlaky) {
		t.Fatalf("Err() = %v, want ErrLost wrapping the failure", err)
	}
}

// TestHoldRidesOutAnUnavailableStore: heartbeats that fail because the
// store cannot be reached (an etcd election, a git remote restarting) are
// tried again until the lease's deadline, however many fail in a row, and
// the first that gets through keeps the lease; Failing says why the
// renewals were late meanwhile. An outage that outlasts the deadline is a
// loss by expiry.
func TestHoldRidesOutAnUnavailableStore(t *testing.T) {
	t.Parallel()
	s, fb := realStore(t)
	fb.unavailable.Store(true)
	rec := mustAcquire(t, s, "k", "o", 0.02) // 1.2 s
	h := keep(t, s, rec, lease.HoldOptions{Interval: 40 * time.Millisecond, RetryPause: 20 * time.Millisecond})

	fb.fail.Store(8) // eight in a row, about 200 ms: well inside the TTL
	deadline := time.Now().Add(5 * time.Second)
	for fb.fail.Load() > 0 && time.Now().Before(deadline) {
		if err := h.Failing(); err != nil && !errors.Is(err, lease.ErrUnavailable) {
			t.Fatalf("Failing() = %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := h.Renew(context.Background()); err != nil {
		t.Fatalf("after the store came back: Renew = %v", err)
	}
	if err := h.Failing(); err != nil {
		t.Errorf("Failing() after a confirmed renewal = %v, want nil", err)
	}

	fb.fail.Store(1 << 30) // for good: lost at the deadline, by expiry
	err := waitDone(t, h, 5*time.Second)
	if !errors.Is(err, lease.ErrLost) || !errors.Is(err, lease.ErrExpired) {
		t.Fatalf("Err() = %v, want ErrLost and ErrExpired", err)
	}
}

func TestHoldReleasesExactlyOnce(t *testing.T) {
	t.Parallel()
	s, _ := realStore(t)
	rec := mustAcquire(t, s, "k", "o", 1)
	var calls atomic.Int32
	h := keep(t, s, rec, lease.HoldOptions{Interval: 10 * time.Millisecond, Release: func(ctx context.Context) error {
		calls.Add(1)
		_, err := s.Release(ctx, lease.Ref{Kind: "k", Owner: "o", Token: rec.Token})
		return err
	}})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := h.Release(context.Background()); err != nil {
				t.Errorf("Release: %v", err)
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("release ran %d times, want 1", n)
	}
	if st, _ := s.Status(context.Background(), "k"); st.State != lease.Free {
		t.Errorf("after Release: %s, want free", st.State)
	}
	select {
	case <-h.Done():
		t.Errorf("a release closed Done: %v", h.Err())
	default:
	}
}

func TestHoldStopLeavesTheLease(t *testing.T) {
	t.Parallel()
	s, _ := realStore(t)
	rec := mustAcquire(t, s, "k", "o", 1)
	h := keep(t, s, rec, lease.HoldOptions{Interval: 10 * time.Millisecond})
	h.Stop()
	h.Stop() // idempotent
	beat := h.Record().Heartbeat
	time.Sleep(50 * time.Millisecond)
	st, _ := s.Status(context.Background(), "k")
	if st.State != lease.Held || !st.Record.Heartbeat.Equal(beat) {
		t.Errorf("after Stop: %s beat %s, want held and no more beats after %s", st.State, st.Record.Heartbeat, beat)
	}
	if h.Err() != nil {
		t.Errorf("Stop reported %v", h.Err())
	}
}

func TestHoldContextCancelIsNotALoss(t *testing.T) {
	t.Parallel()
	s, _ := realStore(t)
	rec := mustAcquire(t, s, "k", "o", 1)
	ctx, cancel := context.WithCancel(context.Background())
	h, err := s.Keep(ctx, "k", "o", rec.Token, lease.HoldOptions{Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	h.Stop() // returns once the goroutine has seen the cancellation
	if h.Err() != nil {
		t.Errorf("cancellation reported %v", h.Err())
	}
}

func TestKeepRefusesALeaseAlreadyGone(t *testing.T) {
	t.Parallel()
	s, _ := realStore(t)
	rec := mustAcquire(t, s, "k", "o", 1)
	if _, err := s.Keep(context.Background(), "k", "o", "wrong-token", lease.HoldOptions{}); !errors.Is(err, lease.ErrLost) || !errors.Is(err, lease.ErrNotOwner) {
		t.Errorf("Keep with a wrong token = %v, want ErrLost and ErrNotOwner", err)
	}
	_, _ = s.Release(context.Background(), lease.Ref{Kind: "k", Owner: "o", Token: rec.Token})
	if _, err := s.Keep(context.Background(), "k", "o", rec.Token, lease.HoldOptions{}); !errors.Is(err, lease.ErrLost) || !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Keep after release = %v, want ErrLost and ErrNotHeld", err)
	}
}

func TestKeepTakesTheAcquiredRecordAsItsFirstBeat(t *testing.T) {
	t.Parallel()
	s, fb := realStore(t)
	rec := mustAcquire(t, s, "k", "o", 1)
	fb.fail.Store(1) // a write now would fail: Keep must not need one
	h, err := s.Keep(context.Background(), "k", "o", rec.Token, lease.HoldOptions{Interval: time.Hour, Acquired: rec})
	if err != nil {
		t.Fatalf("Keep with the acquired record: %v", err)
	}
	defer h.Stop()
	if h.Record() != rec {
		t.Errorf("the hold did not start from the acquired record")
	}
	fb.fail.Store(0)
	if _, err := s.Keep(context.Background(), "k", "o", "not-ours", lease.HoldOptions{Acquired: rec}); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Keep with a record of another token = %v, want it to check the store and find the lease lost", err)
	}
}

// flakyReads fails reads as well as updates: a store that does not
// answer at all.
type flakyReads struct{ flakyBackend }

func (b *flakyReads) Read(ctx context.Context, kind string) (*lease.Record, error) {
	if b.fail.Add(-1) >= 0 {
		return nil, errUnreachable
	}
	b.fail.Store(0)
	return b.Backend.Read(ctx, kind)
}

// TestAcquireWaitRidesOutAnUnavailableStore: a waiter whose attempts fail
// because the store cannot be reached (an etcd election, a git remote
// restarting) waits on and tries again at the next poll, both before its
// first refusal and after it, and gets the lease once it is free; a wait
// that ends while the store still does not answer says so.
func TestAcquireWaitRidesOutAnUnavailableStore(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	holder, err := dirstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	held, err := holder.Acquire(context.Background(), lease.Request{Kind: "k", Owner: "a", TTLMinutes: 60})
	if err != nil {
		t.Fatal(err)
	}
	fb := &flakyReads{flakyBackend{Backend: holder.Backend()}}
	fb.unavailable.Store(true)
	waiter, err := lease.New(fb, lease.WithPollInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	fb.fail.Store(3) // the first attempts: the store does not answer
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		acq, err := waiter.AcquireWait(ctx, lease.Request{Kind: "k", Owner: "b", TTLMinutes: 1})
		if err == nil && acq.Record.Owner != "b" {
			err = fmt.Errorf("acquired %+v", acq.Record)
		}
		done <- err
	}()
	drained := func() {
		for deadline := time.Now().Add(10 * time.Second); fb.fail.Load() > 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the waiter stopped trying")
			}
		}
	}
	drained() // the outage, then refusals (held)
	time.Sleep(50 * time.Millisecond)
	fb.fail.Store(3) // again, now that the waiter has been refused
	drained()
	if _, err := holder.Release(context.Background(), lease.Ref{Kind: "k", Owner: "a", Token: held.Record.Token}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("AcquireWait = %v, want the lease once the store answers and it is free", err)
	}

	fb.fail.Store(1 << 30) // for good: the wait ends with the store's error
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := waiter.AcquireWait(ctx, lease.Request{Kind: "k2", Owner: "b", TTLMinutes: 1}); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("AcquireWait on a store that never answers = %v, want ErrUnavailable", err)
	}
}
