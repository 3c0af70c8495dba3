package dirstore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/sys/storefile"
	"github.com/durable-lease/durable-lease/lease"
)

// noReplaceUnsupported records that this filesystem refused renameat2's
// RENAME_NOREPLACE, so guards fall back to mkdir plus a holder file.
var noReplaceUnsupported atomic.Bool

// createGuard makes the guard directory at path holding holder.json, and
// returns holder.json open with an exclusive flock on it: holding that lock
// is what makes the guard live (section 3.3 of docs/PROTOCOL.md). It
// prepares the directory under a unique name and moves it into place with
// renameat2(RENAME_NOREPLACE), so the guard appears with its holder already
// recorded and locked; it fails with fs.ErrExist if anything is at path,
// including another implementation's empty mkdir guard. Where the
// filesystem lacks RENAME_NOREPLACE it uses mkdir, which is equally
// exclusive.
func createGuard(path string, holder []byte, perm storefile.Perm) (*holderLock, error) {
	if _, err := os.Lstat(path); err == nil {
		return nil, fs.ErrExist
	}
	if !noReplaceUnsupported.Load() {
		tmp := path + ".new-" + lease.RandomHex(8)
		if err := storefile.Mkdir(tmp, perm); err != nil {
			return nil, err
		}
		lock, err := createLockedFile(filepath.Join(tmp, holderFile), holder, perm)
		if err != nil {
			_ = os.RemoveAll(tmp)
			return nil, err
		}
		err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE)
		if err == nil {
			return lock, nil
		}
		_ = unlinkFile(filepath.Join(tmp, holderFile))
		_ = removeDir(tmp)
		lock.Close()
		if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
			return nil, fs.ErrExist
		}
		if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
			return nil, err
		}
		noReplaceUnsupported.Store(true)
	}
	return mkdirGuard(path, holder, perm)
}

// renameNoReplace moves from to to unless something is already at to.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		if _, serr := os.Lstat(to); serr == nil {
			return fs.ErrExist
		}
		return os.Rename(from, to)
	}
	return err
}
