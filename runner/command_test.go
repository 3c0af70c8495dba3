package runner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/lease"
)

// These tests call Command as a library caller does, on a real store
// directory, with real processes under the real guardian (this test
// binary started again: runner's init serves the role). What a user of
// the pool-run binary sees (its stderr, its signals, terminals) is tested
// in internal/cli/poolruncli and the testscripts of internal/testkit/clitest.

// waitFile waits for the work to write a line to name in dir, and
// returns it.
func waitFile(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(p); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("%s did not appear", name)
	return ""
}

// live reports whether pid is a process other than a zombie.
func live(pid int) bool {
	st := processState(pid)
	return st != 0 && st != 'Z' && st != 'X'
}

// runAsync starts Command in the background.
func runAsync(o Options, argv ...string) <-chan *Result {
	done := make(chan *Result, 1)
	go func() { done <- Command(context.Background(), o, argv) }()
	return done
}

func waitResult(t *testing.T, done <-chan *Result, within time.Duration) *Result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(within):
		t.Fatalf("the run did not end within %s", within)
		return nil
	}
}

func TestExitStatusPassesThrough(t *testing.T) {
	t.Parallel()
	s := testStore(t)
	tests := []struct {
		name string
		argv []string
		exit int
		code string
	}{
		{"success", []string{"true"}, 0, CodeOK},
		{"own status", []string{"sh", "-c", "exit 7"}, 7, CodeFailed},
		{"own status 75 is no loss", []string{"sh", "-c", "exit 75"}, 75, CodeFailed},
		{"killed by a signal", []string{"sh", "-c", "kill -KILL $$"}, 128 + 9, CodeFailed},
		{"not found", []string{"no-such-program-here"}, ExitNotFound, CodeNotFound},
		{"not executable", []string{"/etc/hostname"}, ExitNotExecutable, CodeNotExecutable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out lockedBuffer
			r := Command(context.Background(), baton(t, s, &out, nil), tt.argv)
			if r.Exit != tt.exit || r.Code != tt.code {
				t.Errorf("result %+v, want exit %d (%s)", r, tt.exit, tt.code)
			}
			freeAfter(t, s, "b")
		})
	}
}

func TestEnvironmentAndStdin(t *testing.T) {
	t.Parallel()
	s := testStore(t)
	var out lockedBuffer
	o := baton(t, s, &out, nil)
	o.Owner = "agent-7"
	o.Stdin = strings.NewReader("ref-a sha-a\nref-b sha-b\n")
	r := Command(context.Background(), o, []string{"sh", "-c", `echo "$POOL_RUN_KIND $POOL_RUN_OWNER ${#POOL_RUN_TOKEN} $POOL_RUN_FENCE"; cat`})
	if r.Exit != 0 {
		t.Fatalf("result %+v", r)
	}
	if want := "b agent-7 32 1\nref-a sha-a\nref-b sha-b\n"; out.String() != want {
		t.Errorf("stdout = %q, want %q", out.String(), want)
	}
	if r.Held.Kind != "b" || r.Held.Owner != "agent-7" || r.HeldFor <= 0 {
		t.Errorf("held %+v for %v, want lease b of agent-7", r.Held, r.HeldFor)
	}
}

// TestLossByForcedRelease: a lease released by force while the work runs
// ends it, a grandchild that ignores SIGTERM included, after the kill
// grace.
func TestLossByForcedRelease(t *testing.T) {
	t.Parallel()
	for _, containment := range containments(t) {
		t.Run(containment, func(t *testing.T) {
			t.Parallel()
			s := testStore(t)
			var out, log lockedBuffer
			o := baton(t, s, &out, nil)
			o.Containment = containment
			o.Log, o.Heartbeat, o.KillGrace = &log, 50*time.Millisecond, 300*time.Millisecond
			done := runAsync(o, "sh", "-c", `trap '' TERM; sleep 60 & echo $! > gc.pid; wait; wait`)
			gc, _ := strconv.Atoi(waitFile(t, o.Dir, "gc.pid"))
			if _, err := s.ForceRelease(context.Background(), "b", "operator"); err != nil {
				t.Fatal(err)
			}
			r := waitResult(t, done, 20*time.Second)
			if r.Exit != ExitLost || r.Code != CodeLost || !errors.Is(r.Err, ErrLost) {
				t.Errorf("result %+v after a forced release, want exit 75, lease_lost", r)
			}
			if live(gc) {
				t.Errorf("grandchild %d that ignores SIGTERM survived the kill grace", gc)
			}
			if !strings.Contains(log.String(), "lost lease b") {
				t.Errorf("no loss line on the log:\n%s", log.String())
			}
		})
	}
}

// TestLossFoundAtRelease: the lease is taken over between heartbeats and
// the command ends before the next one. The release finds the successor:
// the run ends lost (75), never 0, and the successor's lease is untouched.
func TestLossFoundAtRelease(t *testing.T) {
	t.Parallel()
	for _, containment := range containments(t) {
		t.Run(containment, func(t *testing.T) {
			t.Parallel()
			s := testStore(t)
			var out lockedBuffer
			o := baton(t, s, &out, nil)
			o.Containment = containment
			o.TTLMinutes, o.Heartbeat = 1, 50*time.Second
			done := runAsync(o, "sh", "-c", "echo $$ > gc.pid; sleep 1; exit 0")
			waitFile(t, o.Dir, "gc.pid")
			if _, err := s.ForceRelease(context.Background(), "b", "operator"); err != nil {
				t.Fatal(err)
			}
			acq, err := s.Acquire(context.Background(), lease.Request{Kind: "b", Owner: "bob", TTLMinutes: 1})
			if err != nil {
				t.Fatal(err)
			}
			r := waitResult(t, done, 20*time.Second)
			if r.Exit != ExitLost || r.Code != CodeLost || !errors.Is(r.Err, ErrLost) {
				t.Errorf("result %+v, want exit 75, lease_lost", r)
			}
			if st, _ := s.Status(context.Background(), "b"); st.State != lease.Held || st.Record.Token != acq.Record.Token {
				t.Errorf("the successor's lease was touched: %+v", st)
			}
		})
	}
}

// TestSignalWhileQueuedLeavesNothing: a signal while the run waits in the
// pool's queue ends it interrupted, with its queue entry removed, the
// wait's line ended, and nothing run.
func TestSignalWhileQueuedLeavesNothing(t *testing.T) {
	t.Parallel()
	s := testStore(t)
	var out lockedBuffer
	sigs := make(chan os.Signal, 1)
	o := baton(t, s, &out, sigs)
	q := &queueLog{}
	p := heldPool(t, s, `{"name":"p","slots":[{"id":1}]}`)
	o.Kind, o.Pool, o.Queue = "", p, q
	ran := filepath.Join(o.Dir, "ran")
	done := runAsync(o, "sh", "-c", "echo ran > "+ran)
	for deadline := time.Now().Add(20 * time.Second); !slices.Contains(q.list(), "show 1"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run never queued")
		}
	}
	sigs <- syscall.SIGTERM
	r := waitResult(t, done, 20*time.Second)
	if r.Exit != 128+int(syscall.SIGTERM) || r.Code != CodeInterrupted || !errors.Is(r.Err, ErrInterrupted) || r.Held.Kind != "" {
		t.Errorf("result %+v, want exit 143, interrupted, nothing held", r)
	}
	if st, _ := p.Status(context.Background()); len(st.Queue) != 0 {
		t.Errorf("queue after the signal = %+v, want empty", st.Queue)
	}
	if got := q.list(); got[len(got)-1] != "done" {
		t.Errorf("queue reporter told %v, want done last", got)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Errorf("the command ran without a slot")
	}
}

// TestInheritedDescriptorsSurviveRuns: a descriptor this process got open
// across exec (here a pipe made so) is passed on to each run's work and
// stays this process's after the runs, however the garbage collector runs:
// it used to be wrapped in an *os.File per run, whose finalizer closed it
// once the run was over, and a later run's socket that took its number.
func TestInheritedDescriptorsSurviveRuns(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	fd := int(w.Fd())
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil { // inherited across exec
		t.Fatal(err)
	}
	var before unix.Stat_t
	if err := unix.Fstat(fd, &before); err != nil {
		t.Fatal(err)
	}
	s := testStore(t)
	var out lockedBuffer
	o := baton(t, s, &out, nil)
	for i := range 3 {
		if r := Command(context.Background(), o, []string{"sh", "-c", "echo run >> /dev/fd/" + strconv.Itoa(fd)}); r.Exit != 0 {
			t.Fatalf("run %d: %+v", i, r)
		}
	}
	for range 20 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		var now unix.Stat_t
		if err := unix.Fstat(fd, &now); err != nil || now.Ino != before.Ino {
			t.Fatalf("descriptor %d is no longer the pipe after the runs: %v", fd, err)
		}
	}
	w.Close()
	got, _ := io.ReadAll(r)
	if string(got) != "run\nrun\nrun\n" {
		t.Errorf("the work wrote %q to the inherited descriptor, want three lines", got)
	}
}
