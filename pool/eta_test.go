package pool_test

import (
	"context"
	"github.com/durable-lease/durable-lease/pool"
	"testing"
	"time"
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

// TestEtaArithmetic: the ETA of position p with k usable slots is
// ceil(p/k) holds of the moving average, less the time the slot that
// frees j-th has been held already (j = p's place in its round).
func TestEtaArithmetic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, etaPool, pool.Options{})
	tp.mustAcquire(t, "ci-a") // slot 1 at t0
	tp.clock.Advance(2 * time.Minute)
	tp.mustAcquire(t, "ci-b") // slot 2 at t0+2m
	tp.clock.Advance(time.Minute)
	var ids []string
	for i, owner := range []string{"w-1", "w-2", "w-3", "w-4"} {
		q, err := tp.Enqueue(ctx, owner, "", pool.ModeBlocking)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, q.RequestID)
		if want := []time.Duration{5 * time.Minute, 7 * time.Minute, 13 * time.Minute, 15 * time.Minute}[i]; time.Duration(q.EtaMs)*time.Millisecond != want {
			t.Errorf("enqueue %s: eta %dms, want %s", owner, q.EtaMs, want)
		}
	}
	// Held 3 min and 1 min of an 8 min average, two slots.
	want := []time.Duration{5 * time.Minute, 7 * time.Minute, 13 * time.Minute, 15 * time.Minute}
	if got := queueEtas(t, tp); !sameDurations(got, want) {
		t.Fatalf("etas %v, want %v", got, want)
	}
	if pos, err := tp.HeartbeatEntry(ctx, ids[2], "w-3"); err != nil || pos.EtaMs != (13*time.Minute).Milliseconds() {
		t.Errorf("heartbeat-entry position %+v, %v; want eta 13m", pos, err)
	}
	// A quarantined slot is not usable: one slot, held 3 min.
	if _, err := tp.Quarantine(ctx, "2", "ops", "broken", true); err != nil {
		t.Fatal(err)
	}
	want = []time.Duration{5 * time.Minute, 13 * time.Minute, 21 * time.Minute, 29 * time.Minute}
	if got := queueEtas(t, tp); !sameDurations(got, want) {
		t.Fatalf("etas with slot 2 quarantined %v, want %v", got, want)
	}
	// Held longer than the average: a tenth of a hold (48 s) is left,
	// then one hold each.
	for i := 0; i < 10; i++ { // the waiters keep their places meanwhile
		tp.clock.Advance(time.Minute)
		tp.mustHeartbeatEntries(t, ids)
	}
	want = []time.Duration{48 * time.Second, 8*time.Minute + 48*time.Second, 16*time.Minute + 48*time.Second, 24*time.Minute + 48*time.Second}
	if got := queueEtas(t, tp); !sameDurations(got, want) {
		t.Fatalf("etas past the average %v, want %v", got, want)
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
	avg, elapsed := 366*24*time.Hour, []time.Duration{time.Hour}
	prev := int64(0)
	for _, pos := range []int{1, 2, 99, 100, 291, 292, 300, 1000, 1 << 30} {
		got := pool.ETAForTest(avg, elapsed, pos)
		if got < prev || got > pool.MaxEtaMs {
			t.Fatalf("eta(%d) = %d after %d", pos, got, prev)
		}
		prev = got
	}
	if got := pool.ETAForTest(avg, elapsed, 1<<30); got != pool.MaxEtaMs {
		t.Errorf("eta far back = %d, want the bound", got)
	}
	for _, ms := range []int64{pool.MaxEtaMs, 1 << 62} {
		if pool.EtaText(ms) == "" || pool.FormatEta(ms) == "" {
			t.Errorf("empty text for %d", ms)
		}
	}
}
