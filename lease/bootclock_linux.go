package lease

import (
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// bootID names this boot and this time namespace: CLOCK_BOOTTIME readings
// are comparable only between processes that share both (a time namespace
// may offset the clock). It is read once per process.
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	id := strings.TrimSpace(string(b))
	if err != nil || len(id) == 0 || len(id) > 64 {
		return ""
	}
	if ns, err := os.Readlink("/proc/self/ns/time"); err == nil {
		id += "/" + strings.TrimSuffix(strings.TrimPrefix(ns, "time:["), "]")
	}
	return id
})

// Boot reads CLOCK_BOOTTIME, which counts from boot, suspend included, and
// which setting the date does not move.
func (realClock) Boot() (BootStamp, bool) {
	id := bootID()
	if id == "" {
		return BootStamp{}, false
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return BootStamp{}, false
	}
	return BootStamp{ID: id, Ms: ts.Nano() / 1e6}, true
}
