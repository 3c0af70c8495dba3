package lease

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// kernelBootID is /proc/sys/kernel/random/boot_id, read once per process
// for both the guard's holder identity and the boot clock's id ("" when
// it cannot be read).
var kernelBootID = sync.OnceValue(func() string {
	b, err := readProcFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
})

// readProcFile reads a small file of /proc (at most 4 KiB) with bare
// system calls: os.ReadFile registers the descriptor with the runtime's
// poller, which a process that does nothing else with it then starts for
// this read alone.
func readProcFile(path string) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 1024)
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= 4<<10 {
				return nil, &os.PathError{Op: "read", Path: path, Err: errors.New("over 4 KiB")}
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if len(buf) < cap(buf) && buf[len(buf)-1] == '\n' {
			// The files read here are one line, which procfs hands
			// out whole to a read with room for it: the read that
			// would find the end is skipped.
			return buf, nil
		}
	}
}

// bootID names this boot and this time namespace: CLOCK_BOOTTIME readings
// are comparable only between processes that share both (a time namespace
// may offset the clock). It is read once per process.
var bootID = sync.OnceValue(func() string {
	id := kernelBootID()
	if len(id) == 0 || len(id) > 64 {
		return ""
	}
	if ns, err := os.Readlink("/proc/self/ns/time"); err == nil {
		id += "/" + strings.TrimSuffix(strings.TrimPrefix(ns, "time:["), "]")
	}
	return id
})

// Boot reads CLOCK_BOOTTIME, which counts from boot, suspend included, and
// which setting the date does not move.
func (WallClock) Boot() (BootStamp, bool) {
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
