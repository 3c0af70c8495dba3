//go:build !linux

package lease

import (
	"os"
	"sync"
)

// self records the pid and the host name off Linux (there is no boot id or
// pid namespace to read): the host keeps another machine's guard, on a
// filesystem shared by mistake, from being judged by this host's locks.
// Guards there are otherwise judged by age.
func self() Process { return Process{PID: os.Getpid(), Host: hostName()} }

var hostName = sync.OnceValue(func() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown-host"
	}
	return h
})

// Alive cannot tell off Linux: known is always false.
func (Process) Alive() (alive bool, reason string, known bool) { return false, "", false }
