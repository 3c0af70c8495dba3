package pool_test

// Races between real processes: the test binary re-executes itself as
// waiters (TestHelperProcess, selected by the POOL_TEST_ROLE variable) over
// one store directory on the real clock.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// Environment of a helper process.
const (
	roleEnv    = "POOL_TEST_ROLE"    // waiter, racer or holder
	fileEnv    = "POOL_TEST_FILE"    // the pool file
	storeEnv   = "POOL_TEST_STORE"   // the store directory
	indexEnv   = "POOL_TEST_INDEX"   // the helper's number; its owner is <role>-<index>
	outEnv     = "POOL_TEST_OUT"     // waiter: the shared grant log; racer, holder: a directory
	holdEnv    = "POOL_TEST_HOLD_MS" // waiter: how long to hold the slot
	roundsEnv  = "POOL_TEST_ROUNDS"  // racer: how many rounds
	helperLife = time.Minute         // a helper never outlives this
)

// TestHelperProcess is not a test: it is the body of the helper processes.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(roleEnv)
	if role == "" {
		return
	}
	go func() {
		time.Sleep(helperLife)
		fmt.Fprintln(os.Stderr, "helper: lived too long")
		os.Exit(3)
	}()
	if err := helperMain(role); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func helperMain(role string) error {
	cfg, err := pool.LoadFile(os.Getenv(fileEnv))
	if err != nil {
		return err
	}
	st, err := dirstore.Open(os.Getenv(storeEnv))
	if err != nil {
		return err
	}
	p, err := pool.Open(st, cfg, pool.Options{Poll: 50 * time.Millisecond, Log: os.Stderr})
	if err != nil {
		return err
	}
	owner := role + "-" + os.Getenv(indexEnv)
	ctx, cancel := context.WithTimeout(context.Background(), helperLife*9/10)
	defer cancel()
	switch role {
	case "waiter":
		g, err := p.Acquire(ctx, pool.AcquireRequest{Owner: owner})
		if err != nil {
			return err
		}
		if err := appendFile(os.Getenv(outEnv), fmt.Sprintf("%s %s %d\n", os.Getenv(indexEnv), g.GrantedAt, time.Now().UnixNano())); err != nil {
			return err
		}
		hold, _ := strconv.Atoi(os.Getenv(holdEnv))
		time.Sleep(time.Duration(hold) * time.Millisecond)
		_, err = p.Release(ctx, "1", owner, g.Token, false)
		return err
	case "cycler":
		// Take a slot, hold it, release it; log both instants.
		g, err := p.Acquire(ctx, pool.AcquireRequest{Owner: owner})
		if err != nil {
			return err
		}
		got := time.Now().UnixNano()
		hold, _ := strconv.Atoi(os.Getenv(holdEnv))
		time.Sleep(time.Duration(hold) * time.Millisecond)
		gave := time.Now().UnixNano()
		if _, err := p.Release(ctx, fmt.Sprint(g.Slot), owner, g.Token, false); err != nil {
			return err
		}
		return appendFile(os.Getenv(outEnv), fmt.Sprintf("%v %d %d\n", g.Slot, got, gave))
	case "racer":
		rounds, _ := strconv.Atoi(os.Getenv(roundsEnv))
		dir := os.Getenv(outEnv)
		for r := range rounds {
			if err := awaitFile(ctx, filepath.Join(dir, fmt.Sprintf("go-%d", r))); err != nil {
				return err
			}
			g, err := p.Acquire(ctx, pool.AcquireRequest{Owner: owner, NoWait: true})
			result := ""
			switch {
			case err == nil:
				result = "granted " + g.Token
			case errors.Is(err, pool.ErrSaturated):
				result = "saturated"
			default:
				result = "error " + err.Error()
			}
			if err := writeAtomic(filepath.Join(dir, fmt.Sprintf("res-%d-%s", r, os.Getenv(indexEnv))), result); err != nil {
				return err
			}
		}
		return nil
	case "tinyttl":
		// Any outcome but a crash: the lease cannot outlive the grant.
		_, err := p.Acquire(ctx, pool.AcquireRequest{Owner: owner, NoWait: true})
		fmt.Fprintln(os.Stderr, "acquire:", err)
		return nil
	case "holder":
		g, err := p.Acquire(ctx, pool.AcquireRequest{Owner: owner, NoWait: true})
		if err != nil {
			return err
		}
		if err := writeAtomic(filepath.Join(os.Getenv(outEnv), "held"), g.Token); err != nil {
			return err
		}
		time.Sleep(helperLife) // never beats; the parent kills it
		return nil
	}
	return fmt.Errorf("unknown role %q", role)
}

// appendFile appends s with one O_APPEND write.
func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func writeAtomic(path, s string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o666); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func awaitFile(ctx context.Context, path string) error {
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", path, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// procPool is a pool over a real-clock store that helper processes share.
type procPool struct {
	*pool.Pool
	file, store, root string
}

func newProcPool(t *testing.T, poolJSON string, opts pool.Options) *procPool {
	t.Helper()
	root := t.TempDir()
	file := filepath.Join(root, "pool.json")
	if err := os.WriteFile(file, []byte(poolJSON), 0o666); err != nil {
		t.Fatal(err)
	}
	cfg, err := pool.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	storeDir := filepath.Join(root, "store")
	st, err := dirstore.Open(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Poll == 0 {
		opts.Poll = 50 * time.Millisecond
	}
	p, err := pool.Open(st, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &procPool{Pool: p, file: file, store: storeDir, root: root}
}

// helper is a running helper process.
type helper struct {
	cmd    *exec.Cmd
	output *bytes.Buffer
	done   chan struct{}
	err    error
}

// start runs the test binary as a helper with role and extra environment.
func (pp *procPool) start(t *testing.T, role string, index int, env ...string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, fileEnv+"="+pp.file, storeEnv+"="+pp.store,
		indexEnv+"="+strconv.Itoa(index))
	cmd.Env = append(cmd.Env, env...)
	h := &helper{cmd: cmd, output: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &lockedWriter{w: h.output}, &lockedWriter{w: h.output}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		h.err = cmd.Wait()
		close(h.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-h.done
	})
	return h
}

// wait waits for the helper to exit and fails the test unless it succeeded.
func (h *helper) wait(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-h.done:
	case <-time.After(within):
		t.Fatalf("helper %v still running after %v; output:\n%s", h.cmd.Env[len(h.cmd.Env)-1], within, h.out())
	}
	if h.err != nil {
		t.Fatalf("helper failed: %v; output:\n%s", h.err, h.out())
	}
}

func (h *helper) out() string {
	w := h.cmd.Stderr.(*lockedWriter)
	w.mu.Lock()
	defer w.mu.Unlock()
	return h.output.String()
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// eventually polls cond until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (pp *procPool) queuedOwners() []string {
	var owners []string
	live, _ := pp.LiveForTest(readQueue(pp.Pool))
	for _, e := range live {
		owners = append(owners, e.Owner)
	}
	return owners
}

func TestProcessesFIFO(t *testing.T) {
	t.Parallel()
	pp := newProcPool(t, `{"slots":[{"id":1}]}`, pool.Options{})
	ctx := context.Background()
	g, err := pp.Acquire(ctx, pool.AcquireRequest{Owner: "parent", NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(pp.root, "grants.log")
	n := 5
	if testing.Short() {
		n = 3
	}
	var helpers []*helper
	for i := range n {
		helpers = append(helpers, pp.start(t, "waiter", i, outEnv+"="+out, holdEnv+"=30"))
		owner := fmt.Sprintf("waiter-%d", i)
		eventually(t, 20*time.Second, owner+" in queue.json", func() bool {
			q := pp.queuedOwners()
			return len(q) == i+1 && q[i] == owner
		})
	}
	queueOrder := pp.queuedOwners()
	if _, err := pp.Release(ctx, "1", "parent", g.Token, false); err != nil {
		t.Fatal(err)
	}
	for _, h := range helpers {
		h.wait(t, 30*time.Second)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var grantOrder []string
	var last string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			t.Fatalf("bad line %q", sc.Text())
		}
		grantOrder = append(grantOrder, "waiter-"+f[0])
		if f[1] < last {
			t.Errorf("grantedAt went backwards: %s after %s", f[1], last)
		}
		last = f[1]
	}
	if !reflect.DeepEqual(grantOrder, queueOrder) {
		t.Errorf("grant order %v, queue order %v", grantOrder, queueOrder)
	}
	if q := readQueue(pp.Pool); len(q) != 0 {
		t.Errorf("queue not empty at the end: %+v", q)
	}
	if s, _ := pp.Store().Status(context.Background(), "slot-1"); s.State != lease.Free {
		t.Errorf("slot-1 is %s at the end", s.State)
	}
}

func TestProcessesLastSlotRace(t *testing.T) {
	t.Parallel()
	procs, rounds := 12, 10
	if testing.Short() {
		procs, rounds = 6, 5
	}
	pp := newProcPool(t, `{"slots":[{"id":1}]}`, pool.Options{})
	dir := filepath.Join(pp.root, "race")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	var helpers []*helper
	for i := range procs {
		helpers = append(helpers, pp.start(t, "racer", i, outEnv+"="+dir, roundsEnv+"="+strconv.Itoa(rounds)))
	}
	ctx := context.Background()
	for r := range rounds {
		if err := writeAtomic(filepath.Join(dir, fmt.Sprintf("go-%d", r)), ""); err != nil {
			t.Fatal(err)
		}
		results := make([]string, procs)
		eventually(t, 30*time.Second, fmt.Sprintf("round %d results", r), func() bool {
			for i := range procs {
				if results[i] != "" {
					continue
				}
				b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("res-%d-%d", r, i)))
				if err == nil {
					results[i] = string(b)
				}
			}
			return !pool.Contains(results, "")
		})
		winners := 0
		for i, res := range results {
			switch {
			case strings.HasPrefix(res, "granted "):
				winners++
				if _, err := pp.Release(ctx, "1", fmt.Sprintf("racer-%d", i), strings.TrimPrefix(res, "granted "), false); err != nil {
					t.Fatalf("round %d: releasing racer-%d's grant: %v", r, i, err)
				}
			case res == "saturated":
			default:
				t.Errorf("round %d: racer-%d: %s", r, i, res)
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d winners, want exactly 1: %q", r, winners, results)
		}
		if q := readQueue(pp.Pool); len(q) != 0 {
			t.Fatalf("round %d: queue not empty: %+v", r, q)
		}
	}
	for _, h := range helpers {
		h.wait(t, 10*time.Second)
	}
}

func TestProcessesKilledWaiterIsDropped(t *testing.T) {
	t.Parallel()
	pp := newProcPool(t, `{"waiterStaleMs":1500,"slots":[{"id":1}]}`, pool.Options{})
	ctx := context.Background()
	g, err := pp.Acquire(ctx, pool.AcquireRequest{Owner: "parent", NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(pp.root, "grants.log")
	victim := pp.start(t, "waiter", 0, outEnv+"="+out, holdEnv+"=0")
	eventually(t, 20*time.Second, "waiter-0 queued", func() bool { return len(pp.queuedOwners()) == 1 })
	next := pp.start(t, "waiter", 1, outEnv+"="+out, holdEnv+"=0")
	eventually(t, 20*time.Second, "waiter-1 queued", func() bool { return len(pp.queuedOwners()) == 2 })

	// Kill the first waiter while it does not hold the queue lock, so the
	// test measures the waiter stale bound, not the lock's 15 s TTL.
	eventually(t, 10*time.Second, "the queue lock free", func() bool {
		s, err := pp.Store().Status(context.Background(), pp.Config().QueueLockKind)
		return err == nil && s.State == lease.Free
	})
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.done
	killed := time.Now()
	if _, err := pp.Release(ctx, "1", "parent", g.Token, false); err != nil {
		t.Fatal(err)
	}
	next.wait(t, 20*time.Second)
	waited := time.Since(killed)

	data, _ := os.ReadFile(out)
	if lines := strings.Split(strings.TrimSpace(string(data)), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "1 ") {
		t.Errorf("grants = %q, want only waiter 1's", data)
	}
	// The victim's entry is gone (the next waiter could not have been
	// granted otherwise); the drop should be journaled.
	dropped := eventsNamed(logEvents(t, pp.Dir()), "queue_entry_dropped_stale")
	switch {
	case len(dropped) == 0:
		t.Errorf("waiter-0's entry was dropped without a queue_entry_dropped_stale event; journal:\n%v", logEvents(t, pp.Dir()))
	case len(dropped) > 1:
		t.Errorf("queue_entry_dropped_stale events = %v, want 1", dropped)
	default:
		if e, _ := dropped[0]["entry"].(map[string]any); e["owner"] != "waiter-0" {
			t.Errorf("dropped %v, want waiter-0's entry", dropped[0])
		}
	}
	// The next waiter got the slot only after the victim's entry went
	// stale: at most 1.5 s after its last heartbeat, which was at most one
	// poll (50 ms) before the kill.
	if waited < time.Second {
		t.Errorf("the next waiter was granted %v after the kill, before the victim's entry could go stale", waited)
	}
}

func TestProcessesKilledHolderIsReaped(t *testing.T) {
	t.Parallel()
	pp := newProcPool(t, `{"ttlMinutes":0.02,"provision":"echo x >> prov.log","slots":[{"id":1}]}`, pool.Options{})
	ctx := context.Background()
	dir := filepath.Join(pp.root, "holder")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	h := pp.start(t, "holder", 0, outEnv+"="+dir)
	eventually(t, 20*time.Second, "the holder's grant", func() bool {
		_, err := os.Stat(filepath.Join(dir, "held"))
		return err == nil
	})
	st, err := pp.Store().Status(context.Background(), "slot-1")
	if err != nil || st.State != lease.Held || st.Record.Owner != "holder-0" {
		t.Fatalf("slot-1 = %+v, %v", st, err)
	}
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-h.done

	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	g, err := pp.Acquire(wctx, pool.AcquireRequest{Owner: "parent"})
	if err != nil {
		t.Fatalf("Acquire after the holder died: %v", err)
	}
	if now := time.Now(); now.Before(st.Record.Heartbeat.Add(st.Record.TTL())) {
		t.Errorf("granted at %v, before the dead holder's lease expired at %v", now, st.Record.Heartbeat.Add(st.Record.TTL()))
	}
	if _, err := pp.Release(ctx, "1", "parent", g.Token, false); err != nil {
		t.Fatal(err)
	}
	reaped := eventsNamed(logEvents(t, pp.Dir()), "slot_reaped")
	if len(reaped) != 1 {
		t.Fatalf("slot_reaped events = %v", reaped)
	}
	if prev, _ := reaped[0]["previous"].(map[string]any); prev["owner"] != "holder-0" {
		t.Errorf("reaped %v, want holder-0's lease", reaped[0])
	}
	data, err := os.ReadFile(filepath.Join(pp.root, "prov.log"))
	if err != nil {
		t.Fatal(err)
	}
	// The slot id is appended to the command: "echo x >> prov.log 1".
	if string(data) != "x 1\nx 1\n" {
		t.Errorf("prov.log = %q, want one provision per grant (2)", data)
	}
}

// TestTinyTTLDoesNotCrash: the smallest TTL accepted (60 ms) must not
// make the heartbeat loop of a held slot spin or panic (it once called
// time.NewTicker(0) for a TTL under 4 ns, which killed the process; such
// TTLs are refused now, see TestConfigRanges). Run in a helper process so
// a panic cannot take the test binary down.
func TestTinyTTLDoesNotCrash(t *testing.T) {
	t.Parallel()
	pp := newProcPool(t, `{"ttlMinutes":0.001,"slots":[{"id":1}]}`, pool.Options{})
	h := pp.start(t, "tinyttl", 0)
	select {
	case <-h.done:
	case <-time.After(30 * time.Second):
		t.Fatal("helper hung")
	}
	if h.err != nil {
		if strings.Contains(h.out(), "non-positive interval for NewTicker") {
			t.Fatalf("ttlMinutes 0.001 crashes the acquiring process: %v", h.err)
		}
		t.Fatalf("helper failed: %v\n%s", h.err, h.out())
	}
}

// TestProcessesManyWaiters starts many blocking waiters at once on a pool of
// two slots. Every one must be granted in the end (a busy queue lock is
// waited out, never fatal), and no slot may ever have two holders: the
// intervals each process held a slot never overlap on that slot.
func TestProcessesManyWaiters(t *testing.T) {
	t.Parallel()
	n := 16
	if testing.Short() {
		n = 6
	}
	pp := newProcPool(t, `{"slots":[{"id":1},{"id":2}]}`, pool.Options{})
	out := filepath.Join(pp.root, "holds.log")
	var helpers []*helper
	for i := range n {
		helpers = append(helpers, pp.start(t, "cycler", i, outEnv+"="+out, holdEnv+"=20"))
	}
	for _, h := range helpers {
		h.wait(t, 50*time.Second)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	type hold struct{ from, to int64 }
	bySlot := map[string][]hold{}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != n {
		t.Fatalf("%d of %d waiters were granted:\n%s", len(lines), n, data)
	}
	for _, line := range lines {
		var slot string
		var h hold
		if _, err := fmt.Sscan(line, &slot, &h.from, &h.to); err != nil {
			t.Fatalf("bad line %q", line)
		}
		for _, o := range bySlot[slot] {
			if h.from < o.to && o.from < h.to {
				t.Errorf("slot %s had two holders at once: %v and %v", slot, o, h)
			}
		}
		bySlot[slot] = append(bySlot[slot], h)
	}
}
