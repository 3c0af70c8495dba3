// Package pooltest is the conformance suite of pool state: the pool's
// behaviour as a caller of package pool sees it (FIFO grants, queue
// positions, wake-ups, silent waiters dropped, async requests and claims,
// failures, statistics, the log), run against a fresh store per test.
// Every place a pool keeps its state (a [pool.Backend]) must pass it; the
// directory store and etcd run it from their own tests with a [Harness].
package pooltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
	"github.com/durable-lease/durable-lease/provision"
)

// Harness makes stores of one backend for the suite.
type Harness struct {
	// New returns an empty store whose owner fence admits owners of the
	// form "pt-<letters/digits>".
	New func(t *testing.T) *lease.Store
	// Client returns another client of the store s (another process's
	// view of it: its own connection, its own handles).
	Client func(t *testing.T, s *lease.Store) *lease.Store
	// TTLMinutes is the slot TTL the suite uses: the shortest the backend
	// honours exactly.
	TTLMinutes float64
	// WaiterStale is the pool's waiterStaleMs in the suite's pools: the
	// shortest the backend honours exactly.
	WaiterStale time.Duration
	// Pass lets d pass on the backend's clock: advance a fake clock, or
	// sleep.
	Pass func(t *testing.T, s *lease.Store, d time.Duration)
	// Margin is how much longer than a TTL the backend may take to expire
	// a lease or a queue entry once its holder falls silent (next to
	// nothing on a fake clock; a server's expiry tick and the rounding to
	// whole seconds on etcd).
	Margin time.Duration
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
		{"GrantRefuseRelease", testGrantRefuseRelease},
		{"FIFO", testFIFO},
		{"WakeOnRelease", testWakeOnRelease},
		{"PlumbingPositions", testPlumbing},
		{"SilentWaiterDropped", testSilentWaiter},
		{"AsyncRequestClaim", testAsync},
		{"ProvisionFailure", testProvisionFailure},
		{"ReapExpiredSlot", testReap},
		{"HoldStatistics", testStats},
		{"OneWinnerForLastSlot", testOneWinner},
		{"Quarantine", testQuarantine},
		{"History", testHistory},
		{"OwnersChecked", testOwners},
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

// pooled is a pool of the suite with its fake runner.
type pooled struct {
	*pool.Pool
	runner *runner
}

// runner records provision calls and fails those it is told to.
type runner struct {
	mu   sync.Mutex
	fail map[string]bool // slot ids whose provision fails
}

func (r *runner) run(_ context.Context, action provision.Action, s *pool.Slot, _ string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if action == provision.ActionProvision && r.fail[s.ID] {
		return errors.New("provision refused by the test")
	}
	return nil
}

func (r *runner) setFail(id string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail == nil {
		r.fail = map[string]bool{}
	}
	r.fail[id] = on
}

// config writes a pool file of n slots and loads it.
func (h Harness) config(t *testing.T, n int) *pool.Config {
	t.Helper()
	slots := "["
	for i := 1; i <= n; i++ {
		if i > 1 {
			slots += ","
		}
		slots += fmt.Sprintf(`{"id":"s%d","attributes":{"port":%d}}`, i, 5000+i)
	}
	slots += "]"
	body := fmt.Sprintf(`{"name":"pt","slots":%s,"provision":"true","waiterStaleMs":%d,"ttlMinutes":%v,"movingAvgSeedMs":60000}`,
		slots, h.WaiterStale.Milliseconds(), h.TTLMinutes)
	file := filepath.Join(t.TempDir(), "pool.json")
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := pool.LoadFile(file)
	if err != nil {
		t.Fatalf("pool file %s: %v", body, err)
	}
	return cfg
}

func open(t *testing.T, s *lease.Store, cfg *pool.Config) *pooled {
	t.Helper()
	r := &runner{}
	p, err := pool.Open(s, cfg, pool.Options{ScriptRunner: r.run, Poll: 50 * time.Millisecond,
		Notify: func(context.Context, pool.Nudge) {}})
	if err != nil {
		t.Fatalf("pool.Open: %v", err)
	}
	return &pooled{Pool: p, runner: r}
}

func (h Harness) newPool(t *testing.T, n int) (*lease.Store, *pool.Config, *pooled) {
	s := h.New(t)
	cfg := h.config(t, n)
	return s, cfg, open(t, s, cfg)
}

func acquire(t *testing.T, p *pooled, owner string) *pool.Grant {
	t.Helper()
	g, err := p.Acquire(bg, pool.AcquireRequest{Owner: owner, NoWait: true})
	if err != nil {
		t.Fatalf("acquire by %s: %v", owner, err)
	}
	return g
}

func release(t *testing.T, p *pool.Pool, g *pool.Grant) {
	t.Helper()
	r, err := p.Release(bg, fmt.Sprint(g.Slot), g.Owner, g.Token, false)
	if err != nil || !r.Released {
		t.Errorf("release slot %v by %s: %+v, %v", g.Slot, g.Owner, r, err)
	}
}

func status(t *testing.T, p *pool.Pool) *pool.Status {
	t.Helper()
	st, err := p.Status(bg)
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	return st
}

// events returns the names of the pool's log events, oldest first.
func events(t *testing.T, p *pooled) []string {
	t.Helper()
	lines, err := p.Log(bg)
	if err != nil {
		t.Fatalf("log: %v", err)
	}
	var out []string
	for _, l := range lines {
		var e struct {
			At    string `json:"at"`
			Event string `json:"event"`
		}
		if err := json.Unmarshal(l, &e); err != nil || e.At == "" || e.Event == "" {
			t.Fatalf("log line %s: want at and event (%v)", l, err)
		}
		out = append(out, e.Event)
	}
	return out
}

// near reports whether an ETA is want less at most the 10 s that the
// slots may have been held for by then in real time.
func near(got, want int64) bool { return got <= want && got > want-10_000 }

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds or 20 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testGrantRefuseRelease(t *testing.T, h Harness) {
	_, _, p := h.newPool(t, 2)
	a, b := acquire(t, p, "pt-a"), acquire(t, p, "pt-b")
	if a.Slot == b.Slot || a.Token == b.Token {
		t.Fatalf("two grants of one slot: %v and %v", a.Slot, b.Slot)
	}
	if a.Fence <= 0 || b.Fence <= 0 {
		t.Errorf("fences %d and %d: want positive", a.Fence, b.Fence)
	}
	if a.Env["POOL_SLOT_ID"] != fmt.Sprint(a.Slot) {
		t.Errorf("grant env %v: want POOL_SLOT_ID=%v", a.Env, a.Slot)
	}
	_, err := p.Acquire(bg, pool.AcquireRequest{Owner: "pt-c", NoWait: true})
	var qe *pool.QueueError
	// The ETA: one hold of the moving average (the seed, 1 min), less the
	// moment the slots have been held (none on a fake clock).
	if !errors.Is(err, pool.ErrSaturated) || !errors.As(err, &qe) || qe.Position != 1 || !near(qe.EtaMs, 60000) {
		t.Fatalf("acquire of a full pool = %v (%+v), want saturated at position 1 with eta about 60000", err, qe)
	}
	st := status(t, p.Pool)
	if len(st.Queue) != 0 {
		t.Errorf("a refused no-wait acquire stayed queued: %+v", st.Queue)
	}
	for _, s := range st.Slots {
		if s.State != lease.Held {
			t.Errorf("slot %s is %s, want held", s.Slot.ID, s.State)
		}
	}
	release(t, p.Pool, a)
	if r, err := p.Release(bg, fmt.Sprint(a.Slot), a.Owner, a.Token, false); err == nil && r.Released {
		t.Errorf("a second release released again")
	}
	c := acquire(t, p, "pt-c")
	if c.Slot != a.Slot || c.Fence <= a.Fence {
		t.Errorf("after the release: slot %v fence %d, want slot %v with a fence above %d", c.Slot, c.Fence, a.Slot, a.Fence)
	}
	ev := events(t, p)
	if count(ev, "granted") != 3 || count(ev, "released") != 1 {
		t.Errorf("log %v: want 3 granted and 1 released", ev)
	}
}

// queueUp starts n blocking waiters, each on its own client, one after
// the other (each queued before the next starts). Each releases its slot
// at once; order gets their owners in the order they were granted.
func queueUp(t *testing.T, h Harness, s *lease.Store, cfg *pool.Config, n int) (order <-chan string, wait func()) {
	t.Helper()
	got := make(chan string, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		owner := fmt.Sprintf("pt-w%d", i)
		p := open(t, h.Client(t, s), cfg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(bg, time.Minute)
			defer cancel()
			g, err := p.Acquire(ctx, pool.AcquireRequest{Owner: owner})
			if err != nil {
				t.Errorf("waiter %s: %v", owner, err)
				got <- owner + ":error"
				return
			}
			got <- owner
			release(t, p.Pool, g)
		}()
		waitFor(t, owner+" in the queue", func() bool { return len(status(t, p.Pool).Queue) == i+1 })
	}
	return got, wg.Wait
}

func testFIFO(t *testing.T, h Harness) {
	s, cfg, p := h.newPool(t, 1)
	holder := acquire(t, p, "pt-h")
	order, wait := queueUp(t, h, s, cfg, 4)
	st := status(t, p.Pool)
	for i, q := range st.Queue {
		if q.Owner != fmt.Sprintf("pt-w%d", i) || q.Position.Position != i+1 || !near(q.EtaMs, int64(i+1)*60000) {
			t.Errorf("queue[%d] = %s at %d eta %d, want pt-w%d at %d eta about %d", i, q.Owner, q.Position.Position, q.EtaMs, i, i+1, (i+1)*60000)
		}
	}
	release(t, p.Pool, holder)
	wait()
	for i := 0; i < 4; i++ {
		if got, want := <-order, fmt.Sprintf("pt-w%d", i); got != want {
			t.Errorf("grant %d went to %s, want %s (first come, first served)", i, got, want)
		}
	}
}

func testWakeOnRelease(t *testing.T, h Harness) {
	// A waiter polls at most every third of waiterStaleMs; with three
	// minutes of it and a poll of a minute, only a wake-up grants it
	// within the 15 s below.
	h.WaiterStale = 3 * time.Minute
	s, cfg, p := h.newPool(t, 1)
	holder := acquire(t, p, "pt-h")
	w, err := pool.Open(h.Client(t, s), cfg, pool.Options{ScriptRunner: (&runner{}).run, Poll: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(bg, 15*time.Second)
		defer cancel()
		g, err := w.Acquire(ctx, pool.AcquireRequest{Owner: "pt-w"})
		if err == nil {
			release(t, w, g)
		}
		got <- err
	}()
	waitFor(t, "the waiter in the queue", func() bool { return len(status(t, p.Pool).Queue) == 1 })
	time.Sleep(100 * time.Millisecond) // its first attempt is behind it
	release(t, p.Pool, holder)
	if err := <-got; err != nil {
		t.Fatalf("waiter after a release: %v (not woken: it would have waited for its poll)", err)
	}
}

func testPlumbing(t *testing.T, h Harness) {
	_, _, p := h.newPool(t, 1)
	a, err := p.Enqueue(bg, "pt-a", "", pool.ModeBlocking)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Enqueue(bg, "pt-b", "sess-b", pool.ModeAsync)
	if err != nil {
		t.Fatal(err)
	}
	if a.Position.Position != 1 || b.Position.Position != 2 {
		t.Fatalf("positions %d and %d, want 1 and 2", a.Position.Position, b.Position.Position)
	}
	var qe *pool.QueueError
	if _, err := p.TryGrant(bg, b.RequestID, "pt-b"); !errors.As(err, &qe) || !errors.Is(err, pool.ErrSaturated) || qe.Position != 2 {
		t.Fatalf("second in line with one slot = %v, want saturated at position 2", err)
	}
	pos, err := p.HeartbeatEntry(bg, b.RequestID, "pt-b")
	if err != nil || pos.Position != 2 {
		t.Fatalf("heartbeat = %+v, %v; want position 2", pos, err)
	}
	g, err := p.TryGrant(bg, a.RequestID, "pt-a")
	if err != nil {
		t.Fatalf("first in line: %v", err)
	}
	if g.RequestID != a.RequestID || g.Mode != pool.ModeBlocking {
		t.Errorf("grant %+v, want request %s", g, a.RequestID)
	}
	if pos, err := p.HeartbeatEntry(bg, b.RequestID, "pt-b"); err != nil || pos.Position != 1 {
		t.Errorf("after the first left: %+v, %v; want position 1", pos, err)
	}
	if _, err := p.HeartbeatEntry(bg, a.RequestID, "pt-a"); !errors.Is(err, pool.ErrQueueEntryLost) {
		t.Errorf("heartbeat of a granted entry = %v, want ErrQueueEntryLost", err)
	}
	st := status(t, p.Pool)
	if len(st.Queue) != 1 || st.Queue[0].ID != b.RequestID || st.Queue[0].Session != "sess-b" || st.Queue[0].Mode != pool.ModeAsync {
		t.Errorf("queue %+v, want only %s (async, sess-b)", st.Queue, b.RequestID)
	}
}

func testSilentWaiter(t *testing.T, h Harness) {
	s, _, p := h.newPool(t, 1)
	a, err := p.Enqueue(bg, "pt-a", "", pool.ModeBlocking)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Enqueue(bg, "pt-b", "", pool.ModeBlocking)
	if err != nil {
		t.Fatal(err)
	}
	// b keeps beating, a falls silent. Time passes in steps of half the
	// stale bound, b beating after each, until a is past it.
	for passed := time.Duration(0); passed <= h.WaiterStale+h.Margin; passed += h.WaiterStale / 2 {
		h.Pass(t, s, h.WaiterStale/2)
		if _, err := p.HeartbeatEntry(bg, b.RequestID, "pt-b"); err != nil {
			t.Fatalf("a beating waiter lost its entry after %s: %v", passed, err)
		}
	}
	if _, err := p.Pump(bg, "pt-pump"); err != nil {
		t.Fatal(err)
	}
	st := status(t, p.Pool)
	if len(st.Queue) != 1 || st.Queue[0].ID != b.RequestID || st.Queue[0].Position.Position != 1 {
		t.Fatalf("queue after a's silence: %+v, want only b, at position 1", st.Queue)
	}
	if _, err := p.HeartbeatEntry(bg, a.RequestID, "pt-a"); !errors.Is(err, pool.ErrQueueEntryLost) {
		t.Errorf("heartbeat of a dropped entry = %v, want ErrQueueEntryLost", err)
	}
	g, err := p.TryGrant(bg, b.RequestID, "pt-b")
	if err != nil {
		t.Fatalf("b, first now: %v", err)
	}
	if g.Owner != "pt-b" {
		t.Errorf("grant to %s", g.Owner)
	}
}

func testAsync(t *testing.T, h Harness) {
	s, cfg, p := h.newPool(t, 1)
	holder := acquire(t, p, "pt-h")
	q, err := p.Request(bg, "pt-a", "sess-a")
	if err != nil {
		t.Fatal(err)
	}
	if q.Position.Position != 1 {
		t.Errorf("request position %d, want 1", q.Position.Position)
	}
	c, err := p.Claim(bg, q.RequestID, "pt-a")
	if err != nil || c.Queued == nil || c.Queued.Position.Position != 1 {
		t.Fatalf("claim while queued = %+v, %v; want queued at 1", c, err)
	}
	nudged := make(chan pool.Nudge, 1)
	w, err := pool.Open(h.Client(t, s), cfg, pool.Options{ScriptRunner: (&runner{}).run, Poll: 50 * time.Millisecond,
		Notify: func(_ context.Context, n pool.Nudge) { nudged <- n }})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.Wait(bg, q.RequestID, "pt-a", 30*time.Second)
		done <- err
	}()
	release(t, p.Pool, holder)
	if err := <-done; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	n := <-nudged
	if n.RequestID != q.RequestID || n.Session != "sess-a" || n.Grant == nil || n.Grant.Owner != "pt-a" {
		t.Fatalf("nudge %+v", n)
	}
	c, err = p.Claim(bg, q.RequestID, "pt-a")
	if err != nil || c.Grant == nil {
		t.Fatalf("claim after the grant = %+v, %v", c, err)
	}
	var token string
	if err := json.Unmarshal(c.Grant["token"], &token); err != nil || token != n.Grant.Token {
		t.Errorf("claimed token %q, want the grant's %q", token, n.Grant.Token)
	}
	if _, err := p.Claim(bg, q.RequestID, "pt-x"); !errors.Is(err, lease.ErrNotOwner) {
		t.Errorf("claim by another owner = %v, want ErrNotOwner", err)
	}
	if _, err := p.Claim(bg, "no-such-request", "pt-a"); !errors.Is(err, pool.ErrUnknownRequest) {
		t.Errorf("claim of an unknown request = %v, want ErrUnknownRequest", err)
	}
	// Once its lease is gone, the grant is lost.
	release(t, p.Pool, n.Grant)
	if _, err := p.Claim(bg, q.RequestID, "pt-a"); !errors.Is(err, pool.ErrLeaseLost) {
		t.Errorf("claim after the release = %v, want ErrLeaseLost", err)
	}
	if ev := events(t, p); count(ev, "request_queued") != 1 || count(ev, "granted") != 2 {
		t.Errorf("log %v: want request_queued and two granted", ev)
	}
}

func testProvisionFailure(t *testing.T, h Harness) {
	_, _, p := h.newPool(t, 1)
	p.runner.setFail("s1", true)
	q, err := p.Enqueue(bg, "pt-a", "", pool.ModeAsync)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.TryGrant(bg, q.RequestID, "pt-a"); !errors.Is(err, pool.ErrProvisionFailed) {
		t.Fatalf("grant with a failing provision = %v, want ErrProvisionFailed", err)
	}
	st := status(t, p.Pool)
	if st.Slots[0].State != lease.Free || len(st.Queue) != 0 {
		t.Errorf("after a failed grant: slot %s, queue %+v; want free and empty", st.Slots[0].State, st.Queue)
	}
	var ce *pool.ClaimError
	if _, err := p.Claim(bg, q.RequestID, "pt-a"); !errors.As(err, &ce) || !errors.Is(err, pool.ErrProvisionFailed) || ce.State != pool.GrantResetFailed {
		t.Errorf("claim of the failed grant = %v, want %s", err, pool.GrantResetFailed)
	}
	if ev := events(t, p); count(ev, "grant_reset_failed") != 1 {
		t.Errorf("log %v: want grant_reset_failed", ev)
	}
	p.runner.setFail("s1", false)
	acquire(t, p, "pt-b")
}

func testReap(t *testing.T, h Harness) {
	s, _, p := h.newPool(t, 1)
	acquire(t, p, "pt-a") // and never heartbeated
	h.Pass(t, s, time.Duration(h.TTLMinutes*float64(time.Minute))+h.Margin)
	sw, err := p.Pump(bg, "pt-pump")
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.ReapedSlots) != 1 || sw.ReapedSlots[0].PreviousOwner != "pt-a" {
		t.Fatalf("pump reaped %+v, want slot s1 of pt-a", sw.ReapedSlots)
	}
	if ev := events(t, p); count(ev, "slot_reaped") != 1 {
		t.Errorf("log %v: want slot_reaped", ev)
	}
	acquire(t, p, "pt-b")
}

func testStats(t *testing.T, h Harness) {
	s, _, p := h.newPool(t, 1)
	if got := p.MovingAvg(bg); got != time.Minute {
		t.Fatalf("moving average with no history %s, want the seed 1m", got)
	}
	g := acquire(t, p, "pt-a")
	h.Pass(t, s, 500*time.Millisecond)
	release(t, p.Pool, g)
	avg := p.MovingAvg(bg)
	if avg < 500*time.Millisecond || avg > 30*time.Second {
		t.Fatalf("moving average after a hold of about 500 ms: %s", avg)
	}
	if st := status(t, p.Pool); st.MovingAvgMs != avg.Milliseconds() {
		t.Errorf("status movingAvgMs %d, want %d", st.MovingAvgMs, avg.Milliseconds())
	}
}

func testOneWinner(t *testing.T, h Harness) {
	s, cfg, p := h.newPool(t, 2)
	// The first slot is kept alive through the race: on a loaded host the
	// racers can take longer than a short TTL, and a second racer taking
	// over a lapsed first slot would be a correct grant, not a second
	// winner of the last one.
	first, err := p.Keep(bg, acquire(t, p, "pt-first"), lease.HoldOptions{Interval: time.Duration(h.TTLMinutes * float64(time.Minute) / 6)})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop()
	const n = 8
	pools := make([]*pooled, n)
	for i := range pools {
		pools[i] = open(t, h.Client(t, s), cfg)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var won []*pool.Grant
	start := make(chan struct{})
	for i, rp := range pools {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			g, err := rp.Acquire(bg, pool.AcquireRequest{Owner: fmt.Sprintf("pt-r%d", i), NoWait: true})
			switch {
			case err == nil:
				mu.Lock()
				won = append(won, g)
				mu.Unlock()
			case !errors.Is(err, pool.ErrSaturated):
				t.Errorf("racer %d: %v", i, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	select {
	case <-first.Done():
		t.Fatalf("the first slot's heartbeats failed during the race (%v): the case proves nothing", first.Err())
	default:
	}
	if len(won) != 1 {
		t.Fatalf("%d racers won the last slot, want exactly 1", len(won))
	}
	if st := status(t, p.Pool); len(st.Queue) != 0 {
		t.Errorf("losers left entries behind: %+v", st.Queue)
	}
}

func testQuarantine(t *testing.T, h Harness) {
	_, _, p := h.newPool(t, 2)
	q, err := p.Quarantine(bg, "s1", "pt-ops", "broken fan", false)
	if err != nil || q.Quarantine.By != "pt-ops" {
		t.Fatalf("quarantine: %+v, %v", q, err)
	}
	st := status(t, p.Pool)
	if st.Slots[0].Quarantine == nil || st.Slots[0].Quarantine.Reason != "broken fan" {
		t.Fatalf("status of a quarantined slot: %+v", st.Slots[0])
	}
	g := acquire(t, p, "pt-a")
	if g.Slot != "s2" {
		t.Fatalf("granted %v, want s2: a quarantined slot is never granted", g.Slot)
	}
	release(t, p.Pool, g)
	if _, err := p.Quarantine(bg, "s2", "pt-ops", "also broken", false); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Acquire(bg, pool.AcquireRequest{Owner: "pt-b"}); !errors.Is(err, pool.ErrQuarantined) {
		t.Fatalf("acquire with every slot quarantined = %v, want ErrQuarantined at once", err)
	}
	if _, err := p.Unquarantine(bg, "s1", "pt-ops"); err != nil {
		t.Fatal(err)
	}
	if g := acquire(t, p, "pt-b"); g.Slot != "s1" {
		t.Errorf("after unquarantine: granted %v, want s1", g.Slot)
	}
	if ev := events(t, p); count(ev, "slot_quarantined") != 2 || count(ev, "slot_unquarantined") != 1 {
		t.Errorf("log %v", ev)
	}
}

func testHistory(t *testing.T, h Harness) {
	s, _, p := h.newPool(t, 2)
	g := acquire(t, p, "pt-a")
	h.Pass(t, s, 200*time.Millisecond)
	release(t, p.Pool, g)
	acquire(t, p, "pt-b")
	hist, err := p.History(bg, pool.HistoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s1 := hist.Slots[0]
	if s1.Grants != 2 || s1.Releases != 1 || s1.HoldMedianMs == nil || *s1.HoldMedianMs < 200 || s1.Utilisation <= 0 {
		t.Errorf("slot s1: %+v", s1)
	}
	if hist.All.Grants != 2 || len(hist.Events) != 3 {
		t.Errorf("all %+v, %d events", hist.All, len(hist.Events))
	}
}
