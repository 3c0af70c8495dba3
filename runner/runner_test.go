package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/durable-lease/durable-lease/dirstore/dirpool" // a directory store's pools

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/gates"
	"github.com/durable-lease/durable-lease/internal/sys/procfs"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// lockedBuffer is a bytes.Buffer that programs of a phase, each with its
// own copying goroutine, can write at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func testStore(t *testing.T) *lease.Store {
	t.Helper()
	s, err := dirstore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func baton(t *testing.T, s *lease.Store, out *lockedBuffer, sigs chan os.Signal) Options {
	t.Helper()
	var log lockedBuffer
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	// Not closed: the interpreter's copy of stdin to a background job may
	// still be reading it when the test ends.
	return Options{Store: s, Kind: "b", Owner: "o", Stdin: null, Stdout: out, Stderr: &log,
		Signals: sigs, KillGrace: 500 * time.Millisecond, Heartbeat: 20 * time.Millisecond, Dir: t.TempDir(),
		CgroupParent: os.Getenv(testrun.EnvCgroupParent)}
}

// containments are the ways a run holds its work that this host offers:
// the guardian's tree always, a cgroup where the hierarchy is writable
// (root, a delegated subtree; always under CI).
func containments(t *testing.T) []string {
	t.Helper()
	if os.Getenv(testrun.EnvCgroupParent) == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no writable cgroup v2 hierarchy: the cgroup path is untested (CI=true: a failure)")
		}
		return []string{ContainTree}
	}
	return []string{ContainCgroup, ContainTree}
}

func freeAfter(t *testing.T, s *lease.Store, kind string) {
	t.Helper()
	st, err := s.Status(context.Background(), kind)
	if err != nil || st.State != lease.Free {
		t.Errorf("%s after the run: %+v, %v; want free", kind, st, err)
	}
}

// waitHeld waits until kind is held, the sign that the work has started.
func waitHeld(t *testing.T, s *lease.Store, kind string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if st, _ := s.Status(context.Background(), kind); st.State == lease.Held {
			return
		}
	}
	t.Fatalf("%s never held", kind)
}

func TestCommandForwardsAnInjectedSignal(t *testing.T) {
	t.Parallel()
	s := testStore(t)
	var out lockedBuffer
	sigs := make(chan os.Signal, 1)
	o := baton(t, s, &out, sigs)
	done := make(chan *Result, 1)
	go func() { done <- Command(context.Background(), o, []string{"sleep", "30"}) }()
	waitHeld(t, s, "b")
	sigs <- syscall.SIGHUP
	r := <-done
	if r.Exit != 128+int(syscall.SIGHUP) || r.Code != "interrupted" || r.Signal != syscall.SIGHUP {
		t.Errorf("result %+v, want exit 129 interrupted by SIGHUP", r)
	}
	freeAfter(t, s, "b")
}

func TestCommandContextCancelActsAsSIGTERM(t *testing.T) {
	t.Parallel()
	s := testStore(t)
	var out lockedBuffer
	o := baton(t, s, &out, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *Result, 1)
	go func() { done <- Command(ctx, o, []string{"sleep", "30"}) }()
	waitHeld(t, s, "b")
	cancel()
	if r := <-done; r.Exit != 143 {
		t.Errorf("exit %d after cancel, want 143", r.Exit)
	}
	freeAfter(t, s, "b")
}

func TestGateStopsOnLoss(t *testing.T) {
	t.Parallel()
	for _, containment := range containments(t) {
		t.Run(containment, func(t *testing.T) {
			t.Parallel()
			s := testStore(t)
			var out lockedBuffer
			o := baton(t, s, &out, nil)
			o.Containment = containment
			g, err := gates.Parse([]byte("kind: b\nphases:\n  - name: long\n    run: echo started; sleep 30\n  - name: after\n    run: echo after\n"), filepath.Join(o.Dir, "g.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan *Result, 1)
			go func() { done <- Gate(context.Background(), o, g) }()
			waitHeld(t, s, "b")
			time.Sleep(100 * time.Millisecond)
			if _, err := s.ForceRelease(context.Background(), "b", "op"); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.Exit != ExitLost || r.Code != PhaseLost || !errors.Is(r.Err, ErrLost) {
				t.Fatalf("result %+v, want exit 75 matching ErrLost", r)
			}
			got := []string{r.Phases[0].Result, r.Phases[1].Result}
			if !slices.Equal(got, []string{PhaseLost, PhaseSkipped}) {
				t.Errorf("phases %v, want [lease_lost skipped]", got)
			}
			if strings.Contains(out.String(), "after") {
				t.Errorf("a phase ran after the loss: %q", out.String())
			}
		})
	}
}

func TestGateResetFailureStops(t *testing.T) {
	t.Parallel()
	s := testStore(t)
	dir := t.TempDir()
	pf := filepath.Join(dir, "pool.json")
	if err := os.WriteFile(pf, []byte(`{"reset":"exit 9","slots":[{"id":1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := pool.LoadFile(pf)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.Open(s, cfg, pool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	o := baton(t, s, &out, nil)
	o.Kind, o.Pool = "", p
	g, err := gates.Parse([]byte("pool: pool.json\nphases:\n  - run: echo one\n  - run: echo two\n"), filepath.Join(dir, "g.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r := Gate(context.Background(), o, g)
	var se *pool.SlotError
	if r.Exit != 1 || r.Code != CodeResetFailed || r.Phases[1].Result != PhaseResetFailed || !r.Phases[1].Reset ||
		!errors.As(r.Err, &se) || se.State != pool.GrantResetFailed {
		t.Errorf("result %+v phases %+v, want exit 1 with phase 2 reset_failed, a *pool.SlotError", r, r.Phases)
	}
	if out.String() != "one\n" {
		t.Errorf("stdout %q, want only phase one", out.String())
	}
	freeAfter(t, s, "slot-1")
}

func TestWorkEnvReplaces(t *testing.T) {
	t.Parallel()
	got := workEnv([]string{"A=1", "POOL_RUN_SLOT=stale", "B=2"}, map[string]string{"A": "grant"}, map[string]string{"POOL_RUN_SLOT": "3"})
	want := []string{"B=2", "A=grant", "POOL_RUN_SLOT=3"}
	if !slices.Equal(got, want) {
		t.Errorf("workEnv = %v, want %v", got, want)
	}
}

// TestGatePhaseLeftoversAreStopped: what a phase leaves running, a
// background job that ignores SIGTERM and is started as the phase's last
// command (so the phase is over before the job's program exists), and a
// setsid'd grandchild, is gone before the next phase and the release. Each
// program carries a marker in its command line, and the whole process
// table is searched for it: a pid the test cannot learn cannot hide it.
func TestGatePhaseLeftoversAreStopped(t *testing.T) {
	t.Parallel()
	for _, containment := range containments(t) {
		t.Run(containment, func(t *testing.T) {
			t.Parallel()
			s := testStore(t)
			var out lockedBuffer
			o := baton(t, s, &out, nil)
			o.Containment = containment
			marker := fmt.Sprintf("leftover-%d-%d", os.Getpid(), time.Now().UnixNano())
			phases := fmt.Sprintf(`kind: b
phases:
  - name: starts
    run: |
      setsid sh -c 'trap "" TERM; echo started > setsid.up; sleep 30' %[1]s-setsid &
      while [ ! -e setsid.up ]; do sleep 0.01; done
      sh -c 'trap "" TERM; sleep 30' %[1]s-bg &
  - name: after
    run: sleep 0.3
`, marker)
			g, err := gates.Parse([]byte(phases), filepath.Join(o.Dir, "g.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if r := Gate(context.Background(), o, g); r.Exit != 0 {
				t.Fatalf("result %+v", r)
			}
			time.Sleep(300 * time.Millisecond) // a late start of the background job
			for _, p := range withMarker(marker) {
				t.Errorf("a process of phase one outlived the gate: %s", p)
			}
		})
	}
}

// withMarker lists the live processes whose command line holds marker.
func withMarker(marker string) []string {
	var found []string
	pids, _ := procfs.PIDs()
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid)
		b, err := os.ReadFile(dir + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(marker)) || bytes.Contains(b, []byte("grep")) {
			continue
		}
		if st, err := procfs.ReadStat(pid); err == nil && st.State != 'Z' {
			found = append(found, dir+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}

// releaseBlocker is a store whose deletes hang until their context ends,
// as a release does on a store that stopped answering.
type releaseBlocker struct {
	lease.Backend
	entered chan struct{}
}

func (b *releaseBlocker) Update(ctx context.Context, kind string, fn func(*lease.Record) (lease.Change, error)) (*lease.Record, error) {
	cur, err := b.Backend.Read(ctx, kind)
	if err == nil {
		if ch, err := fn(cur); err == nil && ch.Op == lease.OpDelete {
			close(b.entered)
			<-ctx.Done()
			return nil, ctx.Err()
		}
	}
	return b.Backend.Update(ctx, kind, fn)
}

// TestSignalDuringReleaseIsHonoured: Ctrl-C while the release hangs ends
// the run at once, interrupted, rather than being swallowed.
func TestSignalDuringReleaseIsHonoured(t *testing.T) {
	t.Parallel()
	dir := testStore(t)
	b := &releaseBlocker{Backend: dir.Backend(), entered: make(chan struct{})}
	s, err := lease.New(b)
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	sigs := make(chan os.Signal, 1)
	o := baton(t, s, &out, sigs)
	done := make(chan *Result, 1)
	go func() { done <- Command(context.Background(), o, []string{"true"}) }()
	select {
	case <-b.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the release never started")
	}
	sigs <- syscall.SIGINT
	select {
	case r := <-done:
		if r.Exit != 130 || r.Code != "interrupted" {
			t.Errorf("result %+v, want exit 130, interrupted", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a SIGINT during a hanging release did not end the run")
	}
}

// TestWalkingChainIsEnded: a work that leaves a chain of processes, each
// starting the next and exiting at once, so that one of them is always
// being re-parented to the guardian. A walk of /proc can miss such a
// process; nothing of the chain may tick after Command returns.
func TestWalkingChainIsEnded(t *testing.T) {
	t.Parallel()
	for _, containment := range containments(t) {
		t.Run(containment, func(t *testing.T) {
			t.Parallel()
			s := testStore(t)
			var out lockedBuffer
			o := baton(t, s, &out, nil)
			o.Containment = containment
			o.KillGrace = 200 * time.Millisecond
			walk := filepath.Join(o.Dir, "walk.sh")
			ticks := filepath.Join(o.Dir, "ticks")
			script := "trap '' TERM HUP\n[ -e " + o.Dir + "/halt ] && exit 0\necho x >> " + ticks + "\nsh " + walk + " &\nexit 0\n"
			if err := os.WriteFile(walk, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.WriteFile(filepath.Join(o.Dir, "halt"), nil, 0o644) })
			r := Command(context.Background(), o, []string{"sh", "-c", "sh " + walk + " & sleep 0.3"})
			if r.Exit != 0 {
				t.Fatalf("result %+v", r)
			}
			n := lines(t, ticks)
			time.Sleep(300 * time.Millisecond)
			if m := lines(t, ticks); m != n {
				t.Errorf("the chain ticked %d more times after the run ended (and the lease was released)", m-n)
			}
		})
	}
}

func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// TestHugeKillGraceIsAGrace: a kill grace of centuries (the largest a
// flag takes) still lets a leftover that handles SIGTERM clean up, rather
// than overflowing into an instant SIGKILL.
func TestHugeKillGraceIsAGrace(t *testing.T) {
	t.Parallel()
	s := testStore(t)
	var out lockedBuffer
	o := baton(t, s, &out, nil)
	o.KillGrace = 2562047 * time.Hour
	cleaned := filepath.Join(o.Dir, "cleaned")
	leftover := `trap "sleep 0.2; echo yes > ` + cleaned + `; exit 0" TERM; sleep 30 & wait`
	r := Command(context.Background(), o, []string{"sh", "-c", "sh -c '" + leftover + "' & sleep 0.2"})
	if r.Exit != 0 {
		t.Fatalf("result %+v", r)
	}
	if _, err := os.Stat(cleaned); err != nil {
		t.Errorf("the leftover got no time to handle SIGTERM: %v", err)
	}
}

// gatePool opens a pool file written into dir.
func gatePool(t *testing.T, s *lease.Store, dir, file string) *pool.Pool {
	t.Helper()
	pf := filepath.Join(dir, "pool.json")
	if err := os.WriteFile(pf, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := pool.LoadFile(pf)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.Open(s, cfg, pool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGateSeesSlotEnvBesideGrantEnv: with a grantEnv, the phases and the
// gate's env still see the slot's POOL_SLOT_* variables, as its provision
// command does; a grantEnv name wins over a POOL_SLOT_* one.
func TestGateSeesSlotEnvBesideGrantEnv(t *testing.T) {
	t.Parallel()
	s := testStore(t)
	dir := t.TempDir()
	p := gatePool(t, s, dir, `{"grantEnv":{"APP_PORT":"{ports.api}","POOL_SLOT_CACHE":"from-grant"},
		"slots":[{"id":1,"db":"acme_test_1","cache":3,"ports":{"api":3000}}]}`)
	var out lockedBuffer
	o := baton(t, s, &out, nil)
	o.Kind, o.Pool = "", p
	g, err := gates.Parse([]byte("pool: pool.json\nenv:\n  DATABASE_URL: pg://h/${POOL_SLOT_DB}\nphases:\n"+
		"  - run: echo \"$DATABASE_URL $APP_PORT $POOL_SLOT_PORTS_API $POOL_SLOT_CACHE $POOL_SLOT_ID\"\n"), filepath.Join(dir, "g.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if r := Gate(context.Background(), o, g); r.Exit != 0 {
		t.Fatalf("gate: %+v", r)
	}
	if want := "pg://h/acme_test_1 3000 3000 from-grant 1\n"; out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
	freeAfter(t, s, "slot-1")
}

// TestGateEnvRefusedBeforeAcquire: a gate env naming a variable that no
// grant of the pool defines is refused before a slot is taken, so its
// provision command never runs.
func TestGateEnvRefusedBeforeAcquire(t *testing.T) {
	t.Parallel()
	s := testStore(t)
	dir := t.TempDir()
	p := gatePool(t, s, dir, `{"provision":"echo >provisioned","grantEnv":{"A":"{id}"},"slots":[{"id":1,"db":"x"},{"id":2}]}`)
	var out lockedBuffer
	o := baton(t, s, &out, nil)
	o.Kind, o.Pool = "", p
	for _, tt := range []struct{ name, ref, want string }{
		{"defined nowhere", "${NOT_DEFINED_ANYWHERE}", "for slot 1 of pool pool: "},
		{"defined by one slot only", "${POOL_SLOT_DB}", "for slot 2 of pool pool: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, err := gates.Parse([]byte("pool: pool.json\nenv:\n  X: "+tt.ref+"\nphases:\n  - run: echo ran\n"), filepath.Join(dir, "g.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			r := Gate(context.Background(), o, g)
			if r.Exit != 2 || r.Code != "usage" || r.Err == nil || !strings.Contains(r.Err.Error(), tt.want) || !strings.Contains(r.Err.Error(), "is not defined") {
				t.Fatalf("result %+v, want exit 2 usage naming %q", r, tt.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "provisioned")); err == nil {
				t.Error("the provision command ran")
			}
			if out.String() != "" {
				t.Errorf("a phase ran: %q", out.String())
			}
			freeAfter(t, s, "slot-1")
		})
	}
}
