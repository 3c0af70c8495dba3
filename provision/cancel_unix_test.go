//go:build unix

package provision

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/procfs"
)

// testGrace is the KillGrace of the cancellation tests: long enough for a
// helper to act on SIGTERM, short enough to keep the tests fast.
const testGrace = 300 * time.Millisecond

// patience bounds every wait in these tests; reaching it means a bug.
const patience = 10 * time.Second

func TestRunCancelStopsEverything(t *testing.T) {
	tests := []struct {
		name   string
		script string
		stdout io.Writer
	}{
		{"grandchild exits on SIGTERM", `"$HELPER" spawn "$PIDFILE" sleep wait`, nil},
		// The default exec handler reports this one as success after
		// its wait delay, leaving the grandchild running.
		{"grandchild ignores SIGTERM and holds stdout", `"$HELPER" spawn "$PIDFILE" stubborn wait`, &bytes.Buffer{}},
		{"grandchild of an earlier command", `"$HELPER" spawn "$PIDFILE" stubborn exit; "$HELPER" sleep`, nil},
		{"background job of the script", `"$HELPER" spawn "$PIDFILE" sleep wait & wait`, &bytes.Buffer{}},
		{"inside a script without shebang", `./noshebang`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "noshebang"), `"$HELPER" spawn "$PIDFILE" stubborn wait`+"\n", 0o755)
			pidFile := filepath.Join(dir, "pids")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()

			done := make(chan error, 1)
			go func() {
				done <- Run(ctx, Command{
					Script:    tt.script,
					Dir:       dir,
					Env:       helperEnviron(t, "PIDFILE="+pidFile),
					Stdout:    tt.stdout,
					KillGrace: testGrace,
				})
			}()
			pids := waitForPIDs(t, pidFile, done)

			cancel()
			cancelled := time.Now()
			var err error
			select {
			case err = <-done:
			case <-time.After(patience):
				t.Fatalf("Run did not return %v after cancellation", patience)
			}
			if took := time.Since(cancelled); took > testGrace+2*time.Second {
				t.Errorf("Run took %v to return after cancellation", took)
			}
			if !errors.Is(err, context.Canceled) || errors.Is(err, ErrFailed) {
				t.Errorf("Run error = %v, want context.Canceled", err)
			}
			for _, pid := range pids {
				waitGone(t, pid)
			}
		})
	}
}

// TestRunOrphanHoldingStdout checks that a process left behind with the
// command's stdout open does not keep Run waiting once its parent exited.
func TestRunOrphanHoldingStdout(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pids")
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Command{
			Script:    `"$HELPER" spawn "$PIDFILE" sleep exit; echo after`,
			Env:       helperEnviron(t, "PIDFILE="+pidFile),
			Stdout:    &out,
			KillGrace: testGrace,
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(patience):
		t.Fatalf("Run still waiting %v after the program exited", patience)
	}
	killPIDs(t, pidFile)
	if got := out.String(); got != "after\n" {
		t.Errorf("stdout = %q, want %q", got, "after\n")
	}
}

// waitForPIDs waits until the spawn helper has written pidFile and returns
// the pids in it. It fails the test if Run returns first.
func waitForPIDs(t *testing.T, pidFile string, done <-chan error) []int {
	t.Helper()
	t.Cleanup(func() { killPIDs(t, pidFile) })
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		if pids := readPIDs(t, pidFile); pids != nil {
			return pids
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned before the helper started: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatalf("no pid file after %v", patience)
	return nil
}

// readPIDs returns the pids in pidFile, or nil if it does not exist yet.
func readPIDs(t *testing.T, pidFile string) []int {
	t.Helper()
	data, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 0 {
			t.Fatalf("bad pid file %q", data)
		}
		pids = append(pids, pid)
	}
	return pids
}

// killPIDs kills what is listed in pidFile, so a failing test leaves no
// helpers behind.
func killPIDs(t *testing.T, pidFile string) {
	for _, pid := range readPIDs(t, pidFile) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// waitGone waits until process pid has exited, failing the test if it
// still runs after patience.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Errorf("process %d still running %v after Run returned", pid, patience)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// processGone reports whether pid has exited. A zombie, which has exited but
// not been reaped by its new parent, counts as gone.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	return st.Gone()
}
