package lease

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/durable-lease/durable-lease/internal/sys/procfs"
)

// self describes this process.
var self = sync.OnceValue(func() Process {
	h := Process{PID: os.Getpid()}
	h.Host, _ = os.Hostname()
	h.Boot = kernelBootID()
	h.PIDNS, _ = os.Readlink("/proc/self/ns/pid")
	if st, _, err := procStat(h.PID); err == nil {
		h.Start = st
	}
	return h
})

// Alive reports whether p is still running, and if not, why (the reason
// names the pid). known is false when this process cannot tell: p lacks
// the identity fields, or lives on another host or in another pid
// namespace.
func (h Process) Alive() (alive bool, reason string, known bool) {
	me := self()
	if h.Boot == "" || h.PIDNS == "" || h.Start == 0 || me.Boot == "" || me.PIDNS == "" || h.Host != me.Host {
		return false, "", false
	}
	if h.Boot != me.Boot {
		return false, "holder ran before the last reboot", true
	}
	if h.PIDNS != me.PIDNS {
		return false, "", false
	}
	start, state, err := procStat(h.PID)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, fmt.Sprintf("holder pid %d has exited", h.PID), true
	case err != nil:
		return false, "", false
	case start != h.Start:
		return false, fmt.Sprintf("holder pid %d was reused by another process", h.PID), true
	case state == 'Z' || state == 'X':
		return false, fmt.Sprintf("holder pid %d is a zombie", h.PID), true
	}
	return true, "", true
}

// procStat reads a process's start time (clock ticks since boot) and its
// state letter.
func procStat(pid int) (start uint64, state byte, err error) {
	st, err := procfs.ReadStat(pid)
	return st.Start, st.State, err
}
