package lease

import (
	"io"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// secureRandom fills b from the kernel's CSPRNG with getrandom(2), which
// is what crypto/rand.Read does on Linux (outside FIPS 140 mode), without
// the timer crypto/rand arms on every call to warn about a read that
// blocks for a minute: that timer starts the runtime's poller in a
// process that has no other use for it. Small reads are served from one
// 64-byte read, which covers a whole acquire (its token, the guard's id
// and three temporary names) with one system call instead of five; the
// bytes are handed out once each.
func secureRandom(b []byte) error {
	if len(b) > len(randomPool.buf)/2 {
		return getrandom(b)
	}
	randomPool.Lock()
	defer randomPool.Unlock()
	if randomPool.left < len(b) {
		if err := getrandom(randomPool.buf[:]); err != nil {
			return err
		}
		randomPool.left = len(randomPool.buf)
	}
	start := len(randomPool.buf) - randomPool.left
	copy(b, randomPool.buf[start:])
	clear(randomPool.buf[start : start+len(b)])
	randomPool.left -= len(b)
	return nil
}

var randomPool struct {
	sync.Mutex
	buf  [64]byte
	left int // unused bytes at the end of buf
}

// getrandom is the getrandom(2) system call itself. unix.Getrandom goes
// through the vDSO, whose first call in a process allocates the vDSO's
// random state, many times the cost of the system call, which pays off
// only for a process that reads random bytes many times
// (bench/twins/firstrandom times both; docs/FAST-PATHS.md).
func getrandom(b []byte) error {
	for len(b) > 0 {
		n, _, errno := unix.Syscall(unix.SYS_GETRANDOM, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0)
		if errno == unix.EINTR {
			continue
		}
		if errno == unix.ENOSYS {
			return urandom(b) // a kernel older than 3.17, or a seccomp filter
		}
		if errno != 0 {
			return errno
		}
		b = b[n:]
	}
	return nil
}

// urandom fills b from /dev/urandom, where getrandom(2) is missing.
func urandom(b []byte) error {
	f, err := os.Open("/dev/urandom")
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.ReadFull(f, b)
	return err
}
