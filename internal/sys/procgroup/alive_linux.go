package procgroup

import (
	"syscall"

	"github.com/durable-lease/durable-lease/internal/sys/procfs"
)

// Alive reports whether a process other than a zombie is still in the
// process group pgid. A zombie cannot use anything, and an orphan's zombie
// may never be reaped where the init process does not reap, so kill(2)
// alone (which counts zombies) would wait out every grace period.
func Alive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err != nil {
		return false
	}
	pids, err := procfs.PIDs()
	if err != nil {
		return true
	}
	for _, pid := range pids {
		if st, err := procfs.ReadStat(pid); err == nil && st.PGRP == pgid && st.State != 'Z' {
			return true
		}
	}
	return false
}
