//go:build unix && !linux

package lease

import (
	"io/fs"
	"os"
)

// createGuard makes the guard directory with mkdir, then records its
// holder and locks it (see [mkdirGuard]).
func createGuard(path string, holder []byte) (*os.File, error) { return mkdirGuard(path, holder) }

func renameNoReplace(from, to string) error {
	if _, err := os.Lstat(to); err == nil {
		return fs.ErrExist
	}
	return os.Rename(from, to)
}

// self records only the pid off Linux: guards there are judged by age.
func self() guardHolder { return guardHolder{PID: os.Getpid()} }

func holderAlive(*guardHolder) (bool, string, bool) { return false, "", false }
