//go:build linux

package lease

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

func TestProcStat(t *testing.T) {
	t.Parallel()
	start, state, err := procStat(os.Getpid())
	if err != nil || start == 0 || state == 'Z' || state == 'X' {
		t.Errorf("procStat(self) = %d, %q, %v", start, state, err)
	}
	if _, _, err := procStat(deadPID(t)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("procStat(dead pid) = %v, want not exist", err)
	}
}

// deadPID starts a short-lived child process, waits for it and returns its
// pid, which then names no process (until the kernel reuses it).
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatalf("short child: %v", err)
	}
	return cmd.ProcessState.Pid()
}
