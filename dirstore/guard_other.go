//go:build unix && !linux

package dirstore

import (
	"io/fs"
	"os"

	"github.com/durable-lease/durable-lease/internal/sys/storefile"
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
