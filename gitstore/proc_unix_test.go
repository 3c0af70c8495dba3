//go:build unix

package gitstore

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/procgroup"
)

// TestOwnGroupKillsTheHelpers: cancelling a git call kills the whole
// process group it runs in, the helpers it started (ssh, a transport)
// included, not git alone.
func TestOwnGroupKillsTheHelpers(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "helper.pid")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "sh", "-c", `sleep 60 & echo $! > "$1"; wait`, "sh", pidFile)
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var helper int
	for deadline := time.Now().Add(10 * time.Second); helper == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the helper did not start")
		}
		b, err := os.ReadFile(pidFile)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			helper, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	cancel()
	if err := cmd.Wait(); err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	pgid := cmd.Process.Pid
	for deadline := time.Now().Add(procgroup.KillWait); procgroup.Alive(pgid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the helper %d outlived the cancelled call", helper)
		}
	}
	// The cancel of a call whose group is gone (here git alone, reaped)
	// is os.ErrProcessDone, which os/exec takes for "nothing to cancel".
	done := exec.CommandContext(context.Background(), "true")
	ownGroup(done)
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	if err := done.Cancel(); err != os.ErrProcessDone {
		t.Fatalf("cancel of a group gone: %v, want os.ErrProcessDone", err)
	}
}
