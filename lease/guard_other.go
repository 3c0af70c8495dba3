//go:build unix && !linux

package lease

import (
	"io/fs"
	"os"
	"sync"

	"github.com/durable-lease/durable-lease/internal/storefile"
)

// createGuard makes the guard directory with mkdir, then records its
// holder and locks it (see [mkdirGuard]).
func createGuard(path string, holder []byte, perm storefile.Perm) (*holderLock, error) {
	return mkdirGuard(path, holder, perm)
}

func renameNoReplace(from, to string) error {
	if _, err := os.Lstat(to); err == nil {
		return fs.ErrExist
	}
	return os.Rename(from, to)
}

// self records the pid and the host name off Linux (there is no boot id or
// pid namespace to read): the host keeps another machine's guard, on a
// filesystem shared by mistake, from being judged by this host's locks.
// Guards there are otherwise judged by age.
func self() guardHolder { return guardHolder{PID: os.Getpid(), Host: hostName()} }

var hostName = sync.OnceValue(func() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown-host"
	}
	return h
})

func holderAlive(*guardHolder) (bool, string, bool) { return false, "", false }
