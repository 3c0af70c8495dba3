package pool_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
	"github.com/durable-lease/durable-lease/provision"
)

// failSlot makes the fake runner fail action on slot id (every action when
// action is "").
func failSlot(tp *testPool, id string, action provision.Action) {
	tp.runner.SetFail(func(_ context.Context, c call) error {
		if c.Slot == id && (action == "" || c.Action == action) {
			return errors.New("refused by the test")
		}
		return nil
	})
}

func (tp *testPool) status(t *testing.T) *pool.Status {
	t.Helper()
	st, err := tp.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestQuarantineAfterFailuresInARow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, twoSlotPool, pool.Options{})
	failSlot(tp, "1", provision.ActionProvision)
	// Slot 1 comes first, fails, and goes back; the third failure in a
	// row quarantines it.
	for i := 1; i <= 3; i++ {
		_, err := tp.Acquire(ctx, pool.AcquireRequest{Owner: "ci-a", NoWait: true})
		if !errors.Is(err, pool.ErrProvisionFailed) {
			t.Fatalf("acquire %d = %v, want ErrProvisionFailed", i, err)
		}
		q := tp.status(t).Slots[0].Quarantine
		if (q != nil) != (i == 3) {
			t.Fatalf("after %d failures: quarantine %+v", i, q)
		}
	}
	q := tp.status(t).Slots[0].Quarantine
	if q.By != pool.ByPool || q.Failures != 3 || !strings.Contains(q.Reason, "3 failures in a row") || !strings.Contains(q.Reason, "provision failed") {
		t.Errorf("quarantine %+v", q)
	}
	if ev := eventsNamed(logEvents(t, tp.Dir()), "slot_quarantined"); len(ev) != 1 || ev[0]["by"] != pool.ByPool || ev[0]["failures"] != 3.0 {
		t.Errorf("log: %v", ev)
	}
	// Waiters never get it: the next grants are slot 2's.
	g := tp.mustAcquire(t, "ci-b")
	if fmt.Sprint(g.Slot) != "2" {
		t.Fatalf("granted slot %v, want 2", g.Slot)
	}
	// Every slot out of rotation: acquire fails at once, blocking or not.
	if _, err := tp.Quarantine(ctx, "2", "ops", "disk full", false); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("quarantine of a held slot = %v, want ErrHeld", err)
	}
	qd, err := tp.Quarantine(ctx, "2", "ops", "disk full", true)
	if err != nil || qd.Quarantine.By != "ops" || qd.Quarantine.Reason != "disk full" {
		t.Fatalf("quarantine --force = %+v, %v", qd, err)
	}
	for _, noWait := range []bool{true, false} {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := tp.Acquire(wctx, pool.AcquireRequest{Owner: "ci-c", NoWait: noWait})
		cancel()
		if !errors.Is(err, pool.ErrQuarantined) {
			t.Fatalf("acquire (no wait %v) with every slot quarantined = %v, want ErrQuarantined", noWait, err)
		}
	}
	if q := tp.status(t).Queue; len(q) != 0 {
		t.Errorf("a refused waiter stayed queued: %+v", q)
	}
	// A second quarantine of a quarantined slot changes nothing.
	if again, err := tp.Quarantine(ctx, "2", "ops", "other", false); err != nil || !again.Already || again.Quarantine.Reason != "disk full" {
		t.Errorf("quarantine again = %+v, %v", again, err)
	}
	// Unquarantine runs reset and health first, and refuses while they fail.
	failSlot(tp, "1", provision.ActionReset)
	var se *pool.SlotError
	if _, err := tp.Unquarantine(ctx, "1", "ops"); !errors.As(err, &se) || se.State != pool.GrantResetFailed {
		t.Fatalf("unquarantine with a failing reset = %v", err)
	}
	if tp.status(t).Slots[0].Quarantine == nil {
		t.Fatal("a failed unquarantine put the slot back")
	}
	tp.runner.SetFail(nil)
	tp.runner.Reset()
	if _, err := tp.Unquarantine(ctx, "1", "ops"); err != nil {
		t.Fatal(err)
	}
	calls := tp.runner.Calls()
	if len(calls) != 2 || calls[0].Action != provision.ActionReset || calls[1].Action != provision.ActionHealth {
		t.Errorf("unquarantine ran %+v, want reset then health", calls)
	}
	if st := tp.status(t); st.Slots[0].State != lease.Free || st.Slots[0].Quarantine != nil {
		t.Errorf("after unquarantine: %+v", st.Slots[0])
	}
	if _, err := tp.Unquarantine(ctx, "1", "ops"); !errors.Is(err, pool.ErrNotQuarantined) {
		t.Errorf("unquarantine of a slot in rotation = %v", err)
	}
	tp.mustAcquire(t, "ci-d") // slot 1 again
}

func TestQuarantineCountsOnlyFailuresInARow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	fail := func(n int) {
		failSlot(tp, "1", provision.ActionHealth)
		for i := 0; i < n; i++ {
			if _, err := tp.Acquire(ctx, pool.AcquireRequest{Owner: "ci-a", NoWait: true}); !errors.Is(err, pool.ErrHealthFailed) {
				t.Fatalf("acquire = %v, want ErrHealthFailed", err)
			}
		}
		tp.runner.SetFail(nil)
	}
	fail(2)
	g := tp.mustAcquire(t, "ci-a") // a success: the count starts again
	if _, err := tp.Release(ctx, "1", g.Owner, g.Token, false); err != nil {
		t.Fatal(err)
	}
	fail(2)
	if q := tp.status(t).Slots[0].Quarantine; q != nil {
		t.Fatalf("quarantined after 2+2 failures with a success between: %+v", q)
	}
	fail(1)
	if q := tp.status(t).Slots[0].Quarantine; q == nil || q.Failures != 3 {
		t.Fatalf("not quarantined after 3 failures in a row: %+v", q)
	}
}

func TestQuarantineAfterZeroNeverQuarantines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, `{"quarantineAfter": 0, "provision": "p", "slots": [{"id": 1}]}`, pool.Options{})
	failSlot(tp, "1", "")
	for i := 0; i < 5; i++ {
		if _, err := tp.Acquire(ctx, pool.AcquireRequest{Owner: "ci-a", NoWait: true}); !errors.Is(err, pool.ErrProvisionFailed) {
			t.Fatalf("acquire = %v", err)
		}
	}
	if q := tp.status(t).Slots[0].Quarantine; q != nil {
		t.Fatalf("quarantineAfter 0 quarantined: %+v", q)
	}
}

func TestProbeQuarantinesAndRestores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, `{"probeMs": 60000, "health": "h", "slots": [{"id": 1}, {"id": 2}]}`, pool.Options{})
	failSlot(tp, "1", provision.ActionHealth)
	for i := 1; i <= 3; i++ {
		sw, err := tp.Pump(ctx, "broker")
		if err != nil {
			t.Fatal(err)
		}
		if len(sw.Probed) != 2 || sw.Probed[0].OK || !sw.Probed[1].OK || sw.Probed[0].Quarantined != (i == 3) {
			t.Fatalf("probe %d: %+v", i, sw.Probed)
		}
		// Not due again until probeMs has passed.
		if sw, _ := tp.Pump(ctx, "broker"); len(sw.Probed) != 0 {
			t.Fatalf("probe ran again before probeMs: %+v", sw.Probed)
		}
		tp.clock.Advance(time.Minute)
	}
	if q := tp.status(t).Slots[0].Quarantine; q == nil || q.By != pool.ByPool {
		t.Fatalf("slot 1 after three failed probes: %+v", q)
	}
	// Healthy again: the next probe resets, checks and restores it.
	tp.runner.SetFail(nil)
	sw, err := tp.Pump(ctx, "broker")
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.Probed) != 2 || !sw.Probed[0].Restored || !sw.Probed[0].OK {
		t.Fatalf("probe after recovery: %+v", sw.Probed)
	}
	if st := tp.status(t); st.Slots[0].Quarantine != nil || st.Slots[0].State != lease.Free || st.Slots[1].State != lease.Free {
		t.Fatalf("after the probes: %+v", st.Slots)
	}
	// An operator's quarantine is not the probe's to lift.
	if _, err := tp.Quarantine(ctx, "2", "ops", "maintenance", false); err != nil {
		t.Fatal(err)
	}
	tp.clock.Advance(time.Minute)
	if sw, _ := tp.Pump(ctx, "broker"); len(sw.Probed) != 1 || fmt.Sprint(sw.Probed[0].Slot) != "1" {
		t.Fatalf("probe with slot 2 quarantined by an operator: %+v", sw.Probed)
	}
	if q := tp.status(t).Slots[1].Quarantine; q == nil || q.By != "ops" {
		t.Fatalf("the probe lifted an operator's quarantine: %+v", q)
	}
}

func TestQuarantineRefusesBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, twoSlotPool, pool.Options{})
	for _, reason := range []string{"", "   ", strings.Repeat("x", 1001), "\xff"} {
		if _, err := tp.Quarantine(ctx, "1", "ops", reason, false); !errors.Is(err, pool.ErrInvalid) {
			t.Errorf("reason %q: %v, want ErrInvalid", reason, err)
		}
	}
	if _, err := tp.Quarantine(ctx, "9", "ops", "x", false); !errors.Is(err, pool.ErrInvalid) {
		t.Errorf("unknown slot: %v", err)
	}
	if _, err := tp.Quarantine(ctx, "1", "bad owner", "x", false); !errors.Is(err, pool.ErrInvalid) {
		t.Errorf("bad owner: %v", err)
	}
	if st := tp.status(t); st.Slots[0].State != lease.Free {
		t.Errorf("a refused quarantine changed the slot: %s", st.Slots[0].State)
	}
}

// TestUnquarantineRacers: two operators (or an operator and a probe)
// lifting one quarantine at once: one runs reset and health, the other is
// refused, and the commands never run twice at the same time.
func TestUnquarantineRacers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	if _, err := tp.Quarantine(ctx, "1", "ops", "maintenance", false); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	running, most := 0, 0
	tp.runner.SetFail(func(ctx context.Context, c call) error {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	})
	errs := make(chan error, 2)
	for _, who := range []string{"ops-a", "ops-b"} {
		go func() { _, err := tp.Unquarantine(ctx, "1", who); errs <- err }()
	}
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) {
		t.Fatalf("unquarantine results %v and %v: want exactly one success", e1, e2)
	}
	if lost := errors.Join(e1, e2); !errors.Is(lost, pool.ErrNotQuarantined) {
		t.Errorf("the loser: %v, want ErrNotQuarantined", lost)
	}
	if most != 1 {
		t.Errorf("%d commands ran on the slot at once", most)
	}
	if ev := eventsNamed(logEvents(t, tp.Dir()), "slot_unquarantined"); len(ev) != 1 {
		t.Errorf("slot_unquarantined logged %d times", len(ev))
	}
	if st := tp.status(t); st.Slots[0].State != lease.Free {
		t.Errorf("slot after the race: %s", st.Slots[0].State)
	}
}

// TestQuarantineForceIsOneChange: --force turns the holder's lease into the
// quarantine in one change; the holder's heartbeat then fails, and the
// journal has the forced release.
func TestQuarantineForceIsOneChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	g := tp.mustAcquire(t, "ci-a")
	if _, err := tp.Quarantine(ctx, "1", "ops", "smoke", true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tp.Heartbeat(ctx, "1", g.Owner, g.Token); err == nil {
		t.Error("the evicted holder's heartbeat succeeded")
	}
	st := tp.status(t).Slots[0]
	if st.Quarantine == nil || st.Quarantine.By != "ops" || st.Record.Fence <= g.Fence {
		t.Errorf("after quarantine --force: %+v (fence %d after %d)", st.Quarantine, st.Record.Fence, g.Fence)
	}
	ev := eventsNamed(logEvents(t, tp.Dir()), "released")
	if len(ev) != 1 || ev[0]["forced"] != true {
		t.Errorf("pool log released events %v", ev)
	}
}

// TestRequestWithEverySlotQuarantined: an async request is refused at
// once, and a waiter that finds every slot quarantined leaves a grant
// document that its claim reports.
func TestRequestWithEverySlotQuarantined(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	q, err := tp.Request(ctx, "ci-a", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tp.Quarantine(ctx, "1", "ops", "down", false); err != nil {
		t.Fatal(err)
	}
	if _, err := tp.Request(ctx, "ci-b", ""); !errors.Is(err, pool.ErrQuarantined) {
		t.Fatalf("request with every slot quarantined = %v", err)
	}
	if _, err := tp.Wait(ctx, q.RequestID, "ci-a", 5*time.Second); !errors.Is(err, pool.ErrQuarantined) {
		t.Fatalf("the waiter = %v, want ErrQuarantined", err)
	}
	var ce *pool.ClaimError
	if _, err := tp.Claim(ctx, q.RequestID, "ci-a"); !errors.As(err, &ce) || ce.State != pool.GrantQuarantined || !errors.Is(err, pool.ErrQuarantined) {
		t.Fatalf("claim = %v, want the quarantined state", err)
	}
}

// TestProbeScheduleAgainstOddLogs: a last probe stamped ahead of the clock
// does not stop probes; a probe is not run at every pump when the log
// cannot be read.
func TestProbeScheduleAgainstOddLogs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, `{"probeMs": 60000, "health": "h", "slots": [{"id": 1}]}`, pool.Options{})
	ahead := `{"at":"` + lease.FormatTime(t0.Add(24*time.Hour)) + `","event":"slots_probed"}`
	if err := tp.Backend().AppendLog(ctx, []byte(ahead)); err != nil {
		t.Fatal(err)
	}
	if sw, err := tp.Pump(ctx, "broker"); err != nil || len(sw.Probed) != 1 {
		t.Fatalf("pump after a probe stamped a day ahead: %+v, %v; want a probe", sw.Probed, err)
	}
	// pool.log replaced by a symlink: the log cannot be read, no probe.
	log := filepath.Join(tp.Dir(), pool.LogFile)
	if err := os.Remove(log); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", log); err != nil {
		t.Fatal(err)
	}
	tp.clock.Advance(2 * time.Minute)
	for i := 0; i < 3; i++ {
		if sw, _ := tp.Pump(ctx, "broker"); len(sw.Probed) != 0 {
			t.Fatalf("pump %d with an unreadable log probed: %+v", i, sw.Probed)
		}
	}
}

// TestFailuresCountedPastAnUnreadableOldLog: a pool.log.1 that cannot be
// read (planted as a symlink) is left out; failures in a row still count,
// and history still works.
func TestFailuresCountedPastAnUnreadableOldLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	g := tp.mustAcquire(t, "ci-a") // creates the pool directory and log
	if _, err := tp.Release(ctx, "1", g.Owner, g.Token, false); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(tp.Dir(), pool.LogFile+".1")); err != nil {
		t.Fatal(err)
	}
	failSlot(tp, "1", provision.ActionProvision)
	for i := 0; i < 3; i++ {
		if _, err := tp.Acquire(ctx, pool.AcquireRequest{Owner: "ci-b", NoWait: true}); !errors.Is(err, pool.ErrProvisionFailed) {
			t.Fatalf("acquire %d = %v", i, err)
		}
	}
	if q := tp.status(t).Slots[0].Quarantine; q == nil {
		t.Fatal("not quarantined after 3 failures with an unreadable pool.log.1")
	}
	if _, err := tp.History(ctx, pool.HistoryOptions{}); err != nil {
		t.Errorf("history: %v", err)
	}
}

// TestLiftOfADeadRestorer: a restorer that died mid-lift leaves the slot
// quarantined; another restorer is refused while the lift's heartbeat is
// fresh and takes it over once it is liftStale old.
func TestLiftOfADeadRestorer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	if _, err := tp.Quarantine(ctx, "1", "ops", "maintenance", false); err != nil {
		t.Fatal(err)
	}
	st := tp.status(t).Slots[0]
	payload := []byte(`{"quarantine":{"reason":"maintenance","by":"ops","at":"x"},"lifting":{"by":"ops-dead","at":"x"}}`)
	if _, err := tp.Store().Replace(ctx, st.Record.Token, lease.Request{Kind: "slot-1", Owner: "ops-dead",
		TTLMinutes: lease.MaxTTLMinutes, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	if _, err := tp.Unquarantine(ctx, "1", "ops"); !errors.Is(err, pool.ErrNotQuarantined) || !strings.Contains(err.Error(), "being restored by ops-dead") {
		t.Fatalf("unquarantine during another's lift = %v", err)
	}
	if q := tp.status(t).Slots[0].Quarantine; q == nil {
		t.Fatal("a lift in progress shows the slot as not quarantined")
	}
	tp.clock.Advance(pool.LiftStale + time.Second)
	if _, err := tp.Unquarantine(ctx, "1", "ops"); err != nil {
		t.Fatalf("unquarantine after the lifter died: %v", err)
	}
	if st := tp.status(t).Slots[0]; st.State != lease.Free {
		t.Errorf("slot %s", st.State)
	}
}
