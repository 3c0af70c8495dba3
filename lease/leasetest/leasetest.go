// Package leasetest is the conformance suite every [lease.Backend] must
// pass: the lease semantics as a caller of [lease.Store] sees them, run
// against a fresh store per test. Backend packages call [Run] from their
// own tests with a [Harness] that says how to make a store and how to let
// its leases lapse.
package leasetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// Harness makes stores of one backend for the suite.
type Harness struct {
	// New returns an empty store whose owner fence admits owners of the
	// form "conf-<letters/digits>".
	New func(t *testing.T) *lease.Store
	// TTLMinutes is the shortest TTL the backend honours exactly (the
	// suite's leases all use it).
	TTLMinutes float64
	// Lapse lets every lease of TTLMinutes taken so far expire on the
	// backend's clock: advance a fake clock, or sleep past the TTL.
	Lapse func(t *testing.T, s *lease.Store)
	// Journal, when set, returns the events journaled so far.
	Journal func(t *testing.T, s *lease.Store) []lease.Event
	// Parallel runs the cases at once. Set it when the stores New makes
	// share nothing a case changes: each has a clock of its own (or all
	// read the real one) and a namespace of its own. On a backend whose
	// Lapse sleeps, the suite then takes about as long as its longest case.
	Parallel bool
}

// Run runs the whole suite.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"AcquireHeldRelease", testAcquireHeldRelease},
		{"HeartbeatFencing", testHeartbeatFencing},
		{"ExpiryNoRevivalTakeover", testExpiryTakeover},
		{"ReapAndForceRelease", testReapForce},
		{"FencesGrow", testFencesGrow},
		{"OneWinner", testOneWinner},
		{"ListAndReconcile", testListReconcile},
		{"WaitWakesOnRelease", testWait},
		{"ReplaceIsFencedByToken", testReplace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if h.Parallel {
				t.Parallel()
			}
			tt.fn(t, h)
		})
	}
}

var bg = context.Background()

func acquire(t *testing.T, h Harness, s *lease.Store, kind, owner string) *lease.Acquisition {
	t.Helper()
	a, err := s.Acquire(bg, lease.Request{Kind: kind, Owner: owner, TTLMinutes: h.TTLMinutes, Payload: []byte(`{"n":1}`)})
	if err != nil {
		t.Fatalf("acquire %s by %s: %v", kind, owner, err)
	}
	return a
}

func state(t *testing.T, s *lease.Store, kind string) *lease.Status {
	t.Helper()
	st, err := s.Status(bg, kind)
	if err != nil {
		t.Fatalf("status %s: %v", kind, err)
	}
	return st
}

func testAcquireHeldRelease(t *testing.T, h Harness) {
	s := h.New(t)
	if st := state(t, s, "k"); st.State != lease.Free {
		t.Fatalf("fresh store: %s", st.State)
	}
	a := acquire(t, h, s, "k", "conf-a")
	r := a.Record
	if r.Owner != "conf-a" || r.Token == "" || r.Fence <= 0 || !r.Seen.Live || a.TookOverExpired || string(r.Payload) != `{"n":1}` {
		t.Fatalf("acquired record %+v", r)
	}
	st := state(t, s, "k")
	// Remaining may be 0 on a backend that reports expiry in whole
	// seconds, rounded down (etcd), never negative while held.
	if st.State != lease.Held || st.Record.Token != r.Token || st.Record.Fence != r.Fence || st.Remaining < -time.Millisecond {
		t.Fatalf("status after acquire: %+v", st)
	}
	for _, owner := range []string{"conf-b", "conf-a"} {
		_, err := s.Acquire(bg, lease.Request{Kind: "k", Owner: owner, TTLMinutes: h.TTLMinutes})
		var held *lease.HeldError
		if !errors.Is(err, lease.ErrHeld) || !errors.As(err, &held) || held.Record.Owner != "conf-a" {
			t.Fatalf("second acquire by %s: %v", owner, err)
		}
	}
	if _, err := s.Release(bg, lease.Ref{Kind: "k", Owner: "conf-a", Token: "wrong-token"}); !errors.Is(err, lease.ErrTokenMismatch) || !errors.Is(err, lease.ErrNotOwner) {
		t.Fatalf("release with a wrong token: %v", err)
	}
	if _, err := s.Release(bg, lease.Ref{Kind: "k", Owner: "conf-b", Token: r.Token}); !errors.Is(err, lease.ErrNotOwner) || errors.Is(err, lease.ErrTokenMismatch) {
		t.Fatalf("release by another owner: %v", err)
	}
	rel, err := s.Release(bg, lease.Ref{Kind: "k", Owner: "conf-a", Token: r.Token})
	if err != nil || !rel.Released || rel.WasExpired {
		t.Fatalf("release: %+v %v", rel, err)
	}
	if st := state(t, s, "k"); st.State != lease.Free {
		t.Fatalf("after release: %s", st.State)
	}
	if rel, err := s.Release(bg, lease.Ref{Kind: "k", Owner: "conf-a", Token: r.Token}); err != nil || rel.Released {
		t.Fatalf("second release: %+v %v", rel, err)
	}
}

func testHeartbeatFencing(t *testing.T, h Harness) {
	s := h.New(t)
	a := acquire(t, h, s, "k", "conf-a")
	if _, err := s.Heartbeat(bg, lease.Ref{Kind: "k", Owner: "conf-a", Token: "nope"}); !errors.Is(err, lease.ErrNotOwner) {
		t.Fatalf("heartbeat with a wrong token: %v", err)
	}
	if _, err := s.Heartbeat(bg, lease.Ref{Kind: "k", Owner: "conf-b", Token: a.Record.Token}); !errors.Is(err, lease.ErrNotOwner) {
		t.Fatalf("heartbeat by another owner: %v", err)
	}
	if _, err := s.Heartbeat(bg, lease.Ref{Kind: "none", Owner: "conf-a", Token: a.Record.Token}); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("heartbeat of a kind with no record: %v", err)
	}
	r, err := s.Heartbeat(bg, lease.Ref{Kind: "k", Owner: "conf-a", Token: a.Record.Token})
	if err != nil || r.Token != a.Record.Token || r.Fence != a.Record.Fence || !r.Seen.Live || !r.AcquiredAt.Equal(a.Record.AcquiredAt) {
		t.Fatalf("heartbeat: %+v %v", r, err)
	}
	if r.Heartbeat.Before(a.Record.Heartbeat) {
		t.Errorf("heartbeat went back: %v < %v", r.Heartbeat, a.Record.Heartbeat)
	}
}

func testExpiryTakeover(t *testing.T, h Harness) {
	s := h.New(t)
	a := acquire(t, h, s, "k", "conf-a")
	h.Lapse(t, s)
	st := state(t, s, "k")
	if st.State != lease.Unknown || st.Record.Owner != "conf-a" {
		t.Fatalf("after the TTL: %+v", st)
	}
	if _, err := s.Heartbeat(bg, lease.Ref{Kind: "k", Owner: "conf-a", Token: a.Record.Token}); !errors.Is(err, lease.ErrExpired) {
		t.Fatalf("heartbeat after expiry: %v (a lapsed lease must not be revived)", err)
	}
	b, err := s.Acquire(bg, lease.Request{Kind: "k", Owner: "conf-b", TTLMinutes: h.TTLMinutes})
	if err != nil || !b.TookOverExpired || b.Previous == nil || b.Previous.Token != a.Record.Token || b.Record.Fence <= a.Record.Fence {
		t.Fatalf("takeover: %+v %v", b, err)
	}
	if _, err := s.Heartbeat(bg, lease.Ref{Kind: "k", Owner: "conf-a", Token: a.Record.Token}); !errors.Is(err, lease.ErrNotOwner) {
		t.Fatalf("the displaced holder's heartbeat: %v", err)
	}
	if _, err := s.Release(bg, lease.Ref{Kind: "k", Owner: "conf-a", Token: a.Record.Token}); !errors.Is(err, lease.ErrNotOwner) {
		t.Fatalf("the displaced holder's release: %v", err)
	}
	if h.Journal != nil {
		var seen bool
		for _, e := range h.Journal(t, s) {
			if e.Event == lease.EventTakeover && e.Kind == "k" && e.By == "conf-b" && e.Previous != nil && e.Previous.Token == a.Record.Token {
				seen = true
			}
		}
		if !seen {
			t.Errorf("the takeover was not journaled: %+v", h.Journal(t, s))
		}
	}
}

func testReapForce(t *testing.T, h Harness) {
	s := h.New(t)
	a := acquire(t, h, s, "k", "conf-a")
	if _, err := s.Reap(bg, "k"); !errors.Is(err, lease.ErrNotDead) {
		t.Fatalf("reap of a live lease: %v", err)
	}
	h.Lapse(t, s)
	prev, err := s.Reap(bg, "k")
	if err != nil || prev == nil || prev.Token != a.Record.Token {
		t.Fatalf("reap of a dead lease: %+v %v", prev, err)
	}
	if st := state(t, s, "k"); st.State != lease.Free {
		t.Fatalf("after reap: %s", st.State)
	}
	if prev, err := s.Reap(bg, "k"); err != nil || prev != nil {
		t.Fatalf("reap of nothing: %+v %v", prev, err)
	}
	b := acquire(t, h, s, "k", "conf-b")
	rel, err := s.ForceRelease(bg, "k", "conf-op")
	if err != nil || !rel.Released || rel.Previous == nil || rel.Previous.Token != b.Record.Token {
		t.Fatalf("force release: %+v %v", rel, err)
	}
	if st := state(t, s, "k"); st.State != lease.Free {
		t.Fatalf("after force release: %s", st.State)
	}
	if h.Journal != nil {
		var reap, force bool
		for _, e := range h.Journal(t, s) {
			reap = reap || e.Event == lease.EventReap && e.Kind == "k"
			force = force || e.Event == lease.EventForceRelease && e.Kind == "k" && e.By == "conf-op"
		}
		if !reap || !force {
			t.Errorf("journal lacks the reap (%v) or the forced release (%v)", reap, force)
		}
	}
}

func testFencesGrow(t *testing.T, h Harness) {
	s := h.New(t)
	var last int64
	for i := range 4 {
		a := acquire(t, h, s, "k", fmt.Sprintf("conf-%c", 'a'+i))
		if a.Record.Fence <= last {
			t.Fatalf("holder %d: fence %d after %d", i, a.Record.Fence, last)
		}
		last = a.Record.Fence
		if i%2 == 0 {
			if _, err := s.Release(bg, lease.Ref{Kind: "k", Owner: a.Record.Owner, Token: a.Record.Token}); err != nil {
				t.Fatal(err)
			}
		} else {
			h.Lapse(t, s) // the next one takes over
		}
	}
}

func testOneWinner(t *testing.T, h Harness) {
	s := h.New(t)
	const n = 12
	var wg sync.WaitGroup
	var mu sync.Mutex
	var won []string
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			owner := fmt.Sprintf("conf-r%02d", i)
			_, err := s.Acquire(bg, lease.Request{Kind: "race", Owner: owner, TTLMinutes: h.TTLMinutes})
			switch {
			case err == nil:
				mu.Lock()
				won = append(won, owner)
				mu.Unlock()
			case !errors.Is(err, lease.ErrHeld):
				t.Errorf("%s: %v", owner, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("winners: %v, want exactly one", won)
	}
}

func testListReconcile(t *testing.T, h Harness) {
	s := h.New(t)
	dead := acquire(t, h, s, "dead", "conf-a")
	h.Lapse(t, s)
	acquire(t, h, s, "live", "conf-b")
	all, err := s.List(bg)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]lease.State{}
	for _, st := range all {
		got[st.Kind] = st.State
	}
	if len(got) != 2 || got["dead"] != lease.Unknown || got["live"] != lease.Held {
		t.Fatalf("list: %v", got)
	}
	rep, err := s.Reconcile(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Held) != 1 || rep.Held[0].Kind != "live" || len(rep.Reaped) != 1 || rep.Reaped[0].Token != dead.Record.Token {
		t.Fatalf("reconcile: held %+v reaped %+v", rep.Held, rep.Reaped)
	}
	if st := state(t, s, "dead"); st.State != lease.Free {
		t.Fatalf("dead after reconcile: %s", st.State)
	}
}

func testWait(t *testing.T, h Harness) {
	s := h.New(t)
	a := acquire(t, h, s, "k", "conf-a")
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(bg, 20*time.Second)
		defer cancel()
		b, err := s.AcquireWait(ctx, lease.Request{Kind: "k", Owner: "conf-b", TTLMinutes: h.TTLMinutes})
		if err == nil && b.Record.Owner != "conf-b" {
			err = fmt.Errorf("acquired by %s", b.Record.Owner)
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the waiter did not wait: %v", err)
	default:
	}
	if _, err := s.Release(bg, lease.Ref{Kind: "k", Owner: "conf-a", Token: a.Record.Token}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiter: %v", err)
	}
}

// testReplace: Replace swaps a live record for a new incarnation (new
// token, larger fence, the old one journaled as forced), only while the
// record still carries the token given; of racing replacers with the same
// token, exactly one wins.
func testReplace(t *testing.T, h Harness) {
	s := h.New(t)
	a := acquire(t, h, s, "k", "conf-a")
	req := lease.Request{Kind: "k", Owner: "conf-b", TTLMinutes: h.TTLMinutes}
	if _, err := s.Replace(bg, "not-the-token", req); !errors.Is(err, lease.ErrTokenMismatch) {
		t.Fatalf("replace with a wrong token = %v, want ErrTokenMismatch", err)
	}
	const n = 6
	var wg sync.WaitGroup
	var mu sync.Mutex
	var won []*lease.Acquisition
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Replace(bg, a.Record.Token, req)
			switch {
			case err == nil:
				mu.Lock()
				won = append(won, r)
				mu.Unlock()
			case !errors.Is(err, lease.ErrTokenMismatch):
				t.Errorf("racing replace: %v", err)
			}
		}()
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d replacers won, want exactly 1", len(won))
	}
	r := won[0]
	if r.Record.Token == a.Record.Token || r.Record.Owner != "conf-b" || r.Record.Fence <= a.Record.Fence || r.Previous == nil || r.Previous.Token != a.Record.Token {
		t.Errorf("replacement %+v (previous %+v), fence %d after %d", r.Record, r.Previous, r.Record.Fence, a.Record.Fence)
	}
	if _, err := s.Heartbeat(bg, lease.Ref{Kind: "k", Owner: "conf-a", Token: a.Record.Token}); err == nil {
		t.Error("the replaced holder's heartbeat succeeded")
	}
	if st := state(t, s, "k"); st.State != lease.Held || st.Record.Token != r.Record.Token {
		t.Errorf("after the replace: %s %+v", st.State, st.Record)
	}
	if h.Journal != nil {
		ev := h.Journal(t, s)
		if len(ev) == 0 || ev[len(ev)-1].Event != lease.EventForceRelease || ev[len(ev)-1].By != "conf-b" {
			t.Errorf("journal %+v: want a force_release by conf-b last", ev)
		}
	}
	// With no token, whatever is there is replaced, and nothing is fine too.
	if _, err := s.Replace(bg, "", lease.Request{Kind: "k", Owner: "conf-c", TTLMinutes: h.TTLMinutes}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Replace(bg, "", lease.Request{Kind: "fresh", Owner: "conf-c", TTLMinutes: h.TTLMinutes}); err != nil || r.Previous != nil {
		t.Fatalf("replace of a free kind: %+v, %v", r, err)
	}
}
