package pool_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
	"github.com/durable-lease/durable-lease/provision"
)

func msPtr(d time.Duration) *int64 { v := d.Milliseconds(); return &v }

func eqMs(a, b *int64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

// TestHistoryFromAScriptedSequence: grants, waits, holds and a failure at
// known times on a fake clock, and the figures history gives for them.
func TestHistoryFromAScriptedSequence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, twoSlotPool, pool.Options{})
	grantAfter := func(owner string, wait time.Duration) *pool.Grant {
		t.Helper()
		q, err := tp.Enqueue(ctx, owner, "", pool.ModeBlocking)
		if err != nil {
			t.Fatal(err)
		}
		tp.clock.Advance(wait)
		g, err := tp.TryGrant(ctx, q.RequestID, owner)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	release := func(g *pool.Grant) {
		t.Helper()
		if _, err := tp.Release(ctx, "1", g.Owner, g.Token, false); err != nil {
			t.Fatal(err)
		}
	}
	g := grantAfter("ci-a", 30*time.Second) // slot 1 at t0+30s, waited 30s
	tp.clock.Advance(4 * time.Minute)
	release(g) // held 4m
	tp.clock.Advance(30 * time.Second)
	g = grantAfter("ci-b", 10*time.Second) // t0+5m10s, waited 10s
	tp.clock.Advance(2 * time.Minute)
	release(g) // held 2m, at t0+7m10s
	tp.clock.Advance(50 * time.Second)
	failSlot(tp, "1", provision.ActionProvision)
	if _, err := tp.Acquire(ctx, pool.AcquireRequest{Owner: "ci-c", NoWait: true}); err == nil {
		t.Fatal("a failing provision granted")
	} // t0+8m
	tp.runner.SetFail(nil)
	tp.clock.Advance(time.Minute)
	tp.mustAcquire(t, "ci-d") // t0+9m, waited 0, still held
	tp.clock.Advance(time.Minute)

	h, err := tp.History(ctx, pool.HistoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.Until.Sub(h.From), 9*time.Minute+30*time.Second; got != want {
		t.Errorf("window %s, want %s (first grant to now)", got, want)
	}
	s1, s2 := h.Slots[0], h.Slots[1]
	if s1.Grants != 3 || s1.Releases != 2 || s1.Failures != 1 || s1.Reaps != 0 {
		t.Errorf("slot 1 counts %+v", s1)
	}
	if s1.HeldMs != (7 * time.Minute).Milliseconds() {
		t.Errorf("slot 1 held %d ms, want 7m (4m + 2m + the 1m of the hold still going)", s1.HeldMs)
	}
	if want := 7.0 / 9.5; math.Abs(s1.Utilisation-want) > 1e-9 {
		t.Errorf("slot 1 utilisation %v, want %v", s1.Utilisation, want)
	}
	if !eqMs(s1.HoldMedianMs, msPtr(2*time.Minute)) || !eqMs(s1.HoldP90Ms, msPtr(4*time.Minute)) {
		t.Errorf("slot 1 holds median %v p90 %v, want 2m and 4m", s1.HoldMedianMs, s1.HoldP90Ms)
	}
	if !eqMs(s1.WaitMedianMs, msPtr(10*time.Second)) || !eqMs(s1.WaitP90Ms, msPtr(30*time.Second)) {
		t.Errorf("slot 1 waits median %v p90 %v, want 10s and 30s", s1.WaitMedianMs, s1.WaitP90Ms)
	}
	if s1.LastFailure == nil || s1.LastFailure.Event != pool.EventGrantResetFailed {
		t.Errorf("slot 1 last failure %+v", s1.LastFailure)
	}
	if s2.Grants != 0 || s2.HeldMs != 0 || s2.Utilisation != 0 || s2.HoldMedianMs != nil {
		t.Errorf("slot 2 %+v, want nothing", s2)
	}
	if h.All.Grants != 3 || h.All.Failures != 1 || math.Abs(h.All.Utilisation-7.0/19) > 1e-9 {
		t.Errorf("all %+v", h.All)
	}

	// The last 2 minutes: the failure and the grant still held.
	h, err = tp.History(ctx, pool.HistoryOptions{Since: 2 * time.Minute, Slot: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Slots) != 1 {
		t.Fatalf("--slot 1 gave %d slots", len(h.Slots))
	}
	s1 = h.Slots[0]
	if s1.Grants != 1 || s1.Failures != 1 || s1.Releases != 0 || s1.HeldMs != time.Minute.Milliseconds() || s1.HoldMedianMs != nil {
		t.Errorf("slot 1 over the last 2m: %+v", s1)
	}
	if len(h.Events) != 2 || h.Events[0].Event != pool.EventGrantResetFailed || h.Events[1].Event != "granted" {
		t.Errorf("events %+v", h.Events)
	}
}

// TestHistoryReapedHoldEndsAtLastHeartbeat: a hold that was reaped lasted
// until its holder's last heartbeat, not until the reap.
func TestHistoryReapedHoldEndsAtLastHeartbeat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, oneSlotPool, pool.Options{TTLMinutes: 1})
	tp.mustAcquire(t, "ci-a")
	tp.clock.Advance(10 * time.Minute)
	if _, err := tp.Pump(ctx, "broker"); err != nil {
		t.Fatal(err)
	}
	h, err := tp.History(ctx, pool.HistoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := h.Slots[0]
	if s.Reaps != 1 || s.HoldMedianMs == nil || *s.HoldMedianMs != 0 {
		t.Errorf("reaped hold: %+v (median %v), want one reap of a hold of 0 ms", s, s.HoldMedianMs)
	}
}

// TestHistoryClockSkew: lines from writers whose clocks disagree (a
// release stamped before its grant, one stamped ahead of this clock) give
// no made-up hold, and the window starts at the earliest stamp.
func TestHistoryClockSkew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	at := func(d time.Duration) string { return lease.FormatTime(t0.Add(d)) }
	for _, l := range []string{
		`{"at":"` + at(time.Minute) + `","event":"granted","slot_id":1,"owner":"a"}`,
		`{"at":"` + at(30*time.Second) + `","event":"released","slot_id":1,"owner":"a"}`,
		`{"at":"` + at(2*time.Minute) + `","event":"granted","slot_id":1,"owner":"b"}`,
		`{"at":"` + at(7*time.Minute) + `","event":"released","slot_id":1,"owner":"b"}`,
	} {
		if err := tp.Backend().AppendLog(ctx, []byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	tp.clock.Advance(5 * time.Minute)
	h, err := tp.History(ctx, pool.HistoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := h.Slots[0]
	if !h.From.Equal(t0.Add(30*time.Second)) || !h.Until.Equal(t0.Add(5*time.Minute)) {
		t.Errorf("window %s to %s", h.From, h.Until)
	}
	if s.Grants != 2 || s.Releases != 2 || len(h.Events) != 4 {
		t.Errorf("counts %+v, %d events", s, len(h.Events))
	}
	// Only b's hold has a length: from its grant to now (its release was
	// stamped ahead); a's release came "before" its grant.
	if s.HoldMedianMs == nil || *s.HoldMedianMs != (3*time.Minute).Milliseconds() || s.HeldMs != (3*time.Minute).Milliseconds() {
		t.Errorf("holds: median %v, held %d ms; want one hold of 3m", s.HoldMedianMs, s.HeldMs)
	}
}
