package poolruncli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/internal/sys/procfs"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// These tests run pool-run as a real process (this test binary, re-run
// with asCLI set), so exit statuses, signals, process groups and terminals
// are the real ones. They test what only the binary does: take the
// process's signals, stop as a process, write --summary-json, print the
// queue line. What runner does for any caller (exit statuses, the work's
// environment, losses) is tested in runner, by calling it.

const asCLI = "POOL_RUN_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(asCLI) == "1" {
		os.Exit(Process())
	}
	// pool-run leaves a signal ignored by whoever started it ignored (as
	// nohup asks); the tests start it as a terminal's shell would, with
	// SIGHUP at its default, even when this run was started under nohup.
	// Once this process catches SIGHUP, a child it starts gets the default.
	if signal.Ignored(syscall.SIGHUP) {
		signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	}
	// pool-run and its guardian are this test binary; testrun starts them
	// without the race detector's second of sleep at exit.
	testrun.Main(m, testrun.Parallel(12))
}

// rig is one test's store and working directory.
type rig struct {
	t     *testing.T
	dir   string
	store string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	dir := t.TempDir()
	return &rig{t: t, dir: dir, store: filepath.Join(dir, "store")}
}

// cmd prepares pool-run with args, in the rig's directory and store.
func (r *rig) cmd(args ...string) *exec.Cmd {
	c := exec.Command(os.Args[0], args...)
	c.Dir = r.dir
	c.Env = append(os.Environ(), asCLI+"=1", "LEASE_STORE="+r.store, "LEASE_OWNER=", "LEASE_POOL_FILE=", "LEASE_OWNER_PATTERN=")
	return c
}

// run runs pool-run to the end and returns its status, stdout and stderr.
func (r *rig) run(stdin string, args ...string) (int, string, string) {
	r.t.Helper()
	c := r.cmd(args...)
	c.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	return status(r.t, c, err), out.String(), errb.String()
}

func status(t *testing.T, c *exec.Cmd, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("pool-run did not run: %v", err)
	}
	return c.ProcessState.ExitCode()
}

func (r *rig) openStore() *lease.Store {
	s, err := dirstore.Open(r.store)
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

func (r *rig) state(kind string) lease.State {
	r.t.Helper()
	st, err := r.openStore().Status(context.Background(), kind)
	if err != nil {
		r.t.Fatal(err)
	}
	return st.State
}

// waitFile waits for a file the command writes when it has started.
func (r *rig) waitFile(name string) string {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(p); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.t.Fatalf("%s did not appear", name)
	return ""
}

// alive reports whether pid is a live process (a zombie is not).
func alive(pid int) bool {
	st, err := procfs.ReadStat(pid)
	return err == nil && st.State != 'Z'
}

// startRun starts pool-run in the background; the command must write
// started.pid (its pid and a newline) once it runs.
func (r *rig) startRun(args ...string) (*exec.Cmd, *bytes.Buffer, chan int) {
	r.t.Helper()
	c := r.cmd(args...)
	var errb bytes.Buffer
	c.Stdout, c.Stderr = io.Discard, &errb
	if err := c.Start(); err != nil {
		r.t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		err := c.Wait()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			done <- -1
			return
		}
		done <- c.ProcessState.ExitCode()
	}()
	r.t.Cleanup(func() { _ = c.Process.Kill() })
	return c, &errb, done
}

func waitExit(t *testing.T, done chan int, within time.Duration) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(within):
		t.Fatalf("pool-run still running after %s", within)
		return 0
	}
}

func TestLossByALapsedTTL(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	// A 1.2 s TTL (about the shortest pool-run keeps); pool-run is then
	// paused for longer than that, as a suspended laptop or a stalled VM
	// would be.
	c, stderr, done := r.startRun("--kind", "b", "--ttl", "0.02", "--kill-grace", "300ms", "--",
		"sh", "-c", "echo $$ > gc.pid; exec sleep 60")
	r.waitFile("gc.pid")
	if err := c.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2400 * time.Millisecond)
	_ = c.Process.Signal(syscall.SIGCONT)
	code := waitExit(t, done, 20*time.Second)
	if code != 75 {
		t.Errorf("exit %d after the TTL lapsed, want 75; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr.String(), "expire") {
		t.Errorf("the loss does not say the lease expired (or was about to):\n%s", stderr)
	}
}

func TestSignalsReleaseAndExit(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
		t.Run(sig.String(), func(t *testing.T) {
			r := newRig(t)
			c, stderr, done := r.startRun("--kind", "b", "--kill-grace", "2s", "--",
				"sh", "-c", "sleep 60 & echo $! > gc.pid; wait")
			gc, _ := strconv.Atoi(r.waitFile("gc.pid"))
			if err := c.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			code := waitExit(t, done, 20*time.Second)
			if code != 128+int(sig) {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, 128+int(sig), stderr)
			}
			if alive(gc) {
				t.Errorf("the command's child %d is still running", gc)
			}
			if st := r.state("b"); st != lease.Free {
				t.Errorf("lease b is %s after %v, want free (released)", st, sig)
			}
		})
	}
}

// TestKillGraceIsSaid: after a signal, a work that does not exit is not
// left looking like a hang: pool-run says once what it waits for and for
// how long, and that a second signal ends the wait. A work that exits at
// once gets no such line. Before, the kill grace ran in silence.
func TestKillGraceIsSaid(t *testing.T) {
	t.Parallel()
	said := regexp.MustCompile(`(?m)^pool-run: the work has not exited after SIGINT; waiting up to \d+(\.\d)?s more for it before SIGKILL \(Ctrl-C again kills it now\)$`)
	t.Run("ignored", func(t *testing.T) {
		t.Parallel()
		r := newRig(t)
		c, stderr, done := r.startRun("--kind", "b", "--kill-grace", "3s", "--",
			"sh", "-c", `trap "" INT TERM; echo $$ > ready.pid; while :; do sleep 0.05; done`)
		r.waitFile("ready.pid")
		if err := c.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if code := waitExit(t, done, 20*time.Second); code != 130 {
			t.Errorf("exit %d, want 130; stderr:\n%s", code, stderr)
		}
		if n := len(said.FindAllString(stderr.String(), -1)); n != 1 {
			t.Errorf("%d lines say what pool-run waits for, want 1; stderr:\n%s", n, stderr)
		}
	})
	t.Run("obeyed", func(t *testing.T) {
		t.Parallel()
		r := newRig(t)
		c, stderr, done := r.startRun("--kind", "b", "--kill-grace", "3s", "--", "sh", "-c", "echo $$ > ready.pid; exec sleep 60")
		r.waitFile("ready.pid")
		if err := c.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		waitExit(t, done, 20*time.Second)
		if strings.Contains(stderr.String(), "before SIGKILL") {
			t.Errorf("a work that exited at once got the kill grace's line:\n%s", stderr)
		}
	})
}

// onePool writes a pool of one slot and holds that slot from the test.
func (r *rig) onePool() (string, *pool.Pool, *pool.Grant) {
	r.t.Helper()
	file := filepath.Join(r.dir, "pool.json")
	if err := os.WriteFile(file, []byte(`{"name":"p","slots":[{"id":1,"port":4100}]}`), 0o644); err != nil {
		r.t.Fatal(err)
	}
	cfg, err := pool.LoadFile(file)
	if err != nil {
		r.t.Fatal(err)
	}
	p, err := pool.Open(r.openStore(), cfg, pool.Options{})
	if err != nil {
		r.t.Fatal(err)
	}
	g, err := p.Acquire(context.Background(), pool.AcquireRequest{Owner: "holder", NoWait: true})
	if err != nil {
		r.t.Fatal(err)
	}
	return file, p, g
}

func TestSignalWhileQueuedLeavesNothing(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	file, p, _ := r.onePool()
	c := r.cmd("--pool", file, "--", "sh", "-c", "echo ran > ran.txt")
	stderr, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "queue position 1") {
	}
	if st, _ := p.Status(context.Background()); len(st.Queue) != 1 {
		t.Fatalf("queue = %+v, want the waiter in it", st.Queue)
	}
	_ = c.Process.Signal(syscall.SIGTERM)
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	code := status(t, c, c.Wait())
	if code != 128+15 {
		t.Errorf("exit %d, want 143", code)
	}
	if st, _ := p.Status(context.Background()); len(st.Queue) != 0 {
		t.Errorf("queue after the signal = %+v, want empty", st.Queue)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "ran.txt")); err == nil {
		t.Errorf("the command ran without a slot")
	}
}

func TestSummaryJSON(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	gate := filepath.Join(r.dir, "gate.yaml")
	if err := os.WriteFile(gate, []byte("kind: b\nphases:\n  - name: one\n    run: echo one\n  - name: two\n    run: exit 4\n  - name: three\n    run: echo three\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := r.run("", "--gate", gate, "--summary-json", "summary.json")
	if code != 4 {
		t.Fatalf("exit %d, want 4; stderr:\n%s", code, stderr)
	}
	if out != "one\n" {
		t.Errorf("stdout %q", out)
	}
	var s struct {
		OK     bool
		Code   string
		Exit   int
		Held   struct{ Kind, Owner string }
		Phases []struct {
			Name, Result string
			Exit         int
		}
	}
	b, err := os.ReadFile(filepath.Join(r.dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.OK || s.Code != "failed" || s.Exit != 4 || s.Held.Kind != "b" || s.Held.Owner != "pool-run@"+filepath.Base(r.dir) || len(s.Phases) != 3 ||
		s.Phases[0].Result != "passed" || s.Phases[1].Result != "failed" || s.Phases[1].Exit != 4 || s.Phases[2].Result != "skipped" {
		t.Errorf("summary = %s", b)
	}
}
