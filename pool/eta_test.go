package pool_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/pool"
)

const etaPool = `{"movingAvgSeedMs": 480000, "slots": [{"id": 1}, {"id": 2}]}`

func queueEtas(t *testing.T, tp *testPool) []time.Duration {
	t.Helper()
	var out []time.Duration
	for _, q := range tp.status(t).Queue {
		out = append(out, time.Duration(q.EtaMs)*time.Millisecond)
	}
	return out
}

func sameDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestEtaArithmetic: the ETA of position p is the p-th soonest time at
// which a usable slot frees: a held slot a moving average from now, or,
// held longer than that, as long again as it has held; then once per
// average. A free slot's turn has come.
func TestEtaArithmetic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, etaPool, pool.Options{})
	tp.mustAcquire(t, "ci-a") // slot 1 at t0
	tp.clock.Advance(2 * time.Minute)
	tp.mustAcquire(t, "ci-b") // slot 2 at t0+2m
	tp.clock.Advance(time.Minute)
	var ids []string
	// Held 3 min and 1 min of an 8 min average, two slots: each frees in
	// 8 min, then every 8 min, so the queue moves two at a time.
	want := []time.Duration{8 * time.Minute, 8 * time.Minute, 16 * time.Minute, 16 * time.Minute}
	for i, owner := range []string{"w-1", "w-2", "w-3", "w-4"} {
		q, err := tp.Enqueue(ctx, owner, "", pool.ModeBlocking)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, q.RequestID)
		if time.Duration(q.EtaMs)*time.Millisecond != want[i] {
			t.Errorf("enqueue %s: eta %dms, want %s", owner, q.EtaMs, want[i])
		}
	}
	if got := queueEtas(t, tp); !sameDurations(got, want) {
		t.Fatalf("etas %v, want %v", got, want)
	}
	if pos, err := tp.HeartbeatEntry(ctx, ids[2], "w-3"); err != nil || pos.EtaMs != (16*time.Minute).Milliseconds() {
		t.Errorf("heartbeat-entry position %+v, %v; want eta 16m", pos, err)
	}
	// A quarantined slot is not usable: one slot.
	if _, err := tp.Quarantine(ctx, "2", "ops", "broken", true); err != nil {
		t.Fatal(err)
	}
	want = []time.Duration{8 * time.Minute, 16 * time.Minute, 24 * time.Minute, 32 * time.Minute}
	if got := queueEtas(t, tp); !sameDurations(got, want) {
		t.Fatalf("etas with slot 2 quarantined %v, want %v", got, want)
	}
	// Held 13 min, longer than the average: as long again, then one hold
	// each.
	for i := 0; i < 10; i++ { // the waiters keep their places meanwhile
		tp.clock.Advance(time.Minute)
		tp.mustHeartbeatEntries(t, ids)
	}
	want = []time.Duration{13 * time.Minute, 21 * time.Minute, 29 * time.Minute, 37 * time.Minute}
	if got := queueEtas(t, tp); !sameDurations(got, want) {
		t.Fatalf("etas past the average %v, want %v", got, want)
	}
}

// TestEtaNeverShrinksWhileNothingMoves: with both slots held and nobody
// leaving, every waiter's ETA stays or grows as time passes, however long
// the holders overstay; it shrinks when a slot frees. Before, it counted
// down from ~2s to <1s and stayed there for the 15 s the slots stayed
// held (with a 2 s average).
func TestEtaNeverShrinksWhileNothingMoves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, `{"movingAvgSeedMs": 2000, "waiterStaleMs": 600000, "slots": [{"id": 1}, {"id": 2}]}`, pool.Options{})
	a := tp.mustAcquire(t, "ci-a")
	tp.clock.Advance(500 * time.Millisecond)
	tp.mustAcquire(t, "ci-b")
	for _, owner := range []string{"w-1", "w-2", "w-3"} {
		if _, err := tp.Enqueue(ctx, owner, "", pool.ModeBlocking); err != nil {
			t.Fatal(err)
		}
	}
	last := queueEtas(t, tp)
	if last[0] != 2*time.Second {
		t.Fatalf("first eta %v, want 2s: a usual hold from now", last[0])
	}
	for step := 0; step < 150; step++ { // 15 s of 100 ms
		tp.clock.Advance(100 * time.Millisecond)
		got := queueEtas(t, tp)
		for i := range got {
			if got[i] < last[i] {
				t.Fatalf("after %v: eta of #%d shrank from %v to %v while nothing moved", time.Duration(step+1)*100*time.Millisecond, i+1, last[i], got[i])
			}
		}
		last = got
	}
	// Held 15.5 s: as long again, so the first waiter is told ~15 s, not <1s.
	if last[0] < 15*time.Second || pool.EtaText(last[0].Milliseconds()) == "<1s" {
		t.Fatalf("etas after 15 s of overstay: %v", last)
	}
	// A slot frees: the first waiter's turn has come.
	if _, err := tp.Release(ctx, "1", "ci-a", a.Token, false); err != nil {
		t.Fatal(err)
	}
	if got := queueEtas(t, tp); got[0] != 0 || got[1] > last[1] {
		t.Fatalf("after a release: etas %v (before %v), want the first 0 and the next no later", got, last)
	}
}

func (tp *testPool) mustHeartbeatEntries(t *testing.T, ids []string) {
	t.Helper()
	for i, id := range ids {
		if _, err := tp.HeartbeatEntry(context.Background(), id, []string{"w-1", "w-2", "w-3", "w-4"}[i]); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEtaText(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ms   int64
		want string
	}{
		{-5, "<1s"}, {0, "<1s"}, {499, "<1s"}, {500, "~1s"}, {40_000, "~40s"}, {59_400, "~59s"},
		{59_600, "~1m"}, {89_000, "~1m"}, {90_000, "~2m"}, {12 * 60_000, "~12m"}, {59*60_000 + 29_000, "~59m"},
		{59*60_000 + 31_000, "~1h00m"}, {125 * 60_000, "~2h05m"},
	} {
		if got := pool.EtaText(tt.ms); got != tt.want {
			t.Errorf("pool.EtaText(%d) = %q, want %q", tt.ms, got, tt.want)
		}
	}
}

// TestFormatEtaAgreesWithEtaMs: the JSON eta says what etaMs says, never
// "~1m" of a few milliseconds.
func TestFormatEtaAgreesWithEtaMs(t *testing.T) {
	t.Parallel()
	for ms, want := range map[int64]string{0: "<1s", 72: "<1s", 40_000: "~40s", 8 * 60_000: "~8m", 125 * 60_000: "~2h05m"} {
		if got := pool.FormatEta(ms); got != want {
			t.Errorf("pool.FormatEta(%d) = %q, want %q", ms, got, want)
		}
	}
}

// TestEtaSaturates: a queue of thousands behind a year-long average gives
// a hundred years at most, never a wrapped-around or negative figure.
func TestEtaSaturates(t *testing.T) {
	t.Parallel()
	avg, free := 366*24*time.Hour, []time.Duration{366 * 24 * time.Hour}
	prev := int64(0)
	for _, pos := range []int{1, 2, 99, 100, 291, 292, 300, 1000, 1 << 30} {
		got := pool.ETAForTest(avg, free, pos)
		if got < prev || got > pool.MaxEtaMs {
			t.Fatalf("eta(%d) = %d after %d", pos, got, prev)
		}
		prev = got
	}
	if got := pool.ETAForTest(avg, free, 1<<30); got != pool.MaxEtaMs {
		t.Errorf("eta far back = %d, want the bound", got)
	}
	for _, ms := range []int64{pool.MaxEtaMs, 1 << 62} {
		if pool.EtaText(ms) == "" || pool.FormatEta(ms) == "" {
			t.Errorf("empty text for %d", ms)
		}
	}
}

// TestEtaOrder: the ETAs of the positions are the frees of the slots in
// order, each slot freeing at its time and then once per average, counted
// by brute force; never smaller further back.
func TestEtaOrder(t *testing.T) {
	t.Parallel()
	const avg = 1000 * time.Millisecond
	for _, free := range [][]time.Duration{
		nil,
		{0},
		{0, 0, time.Second},
		{time.Second, 1500 * time.Millisecond},
		{time.Second, 7300 * time.Millisecond, 2 * time.Second},
		{0, 20 * time.Second},
	} {
		var all []int64
		for _, f := range free {
			for n := int64(0); n < 60; n++ {
				all = append(all, f.Milliseconds()+n*avg.Milliseconds())
			}
		}
		if len(free) == 0 {
			for n := int64(1); n <= 60; n++ {
				all = append(all, n*avg.Milliseconds())
			}
		}
		slices.Sort(all)
		for pos := 1; pos <= 40; pos++ {
			if got := pool.ETAForTest(avg, free, pos); got != all[pos-1] {
				t.Errorf("free %v: eta(%d) = %d, want %d", free, pos, got, all[pos-1])
			}
		}
	}
	// Holds that take no time: the soonest slot frees for everyone.
	if got := pool.ETAForTest(0, []time.Duration{3 * time.Second, time.Second}, 5); got != 1000 {
		t.Errorf("a zero average: eta %d, want 1000", got)
	}
}
