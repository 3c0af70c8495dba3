//go:build unix

package dirstore

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/sys/storefile"
)

// lockDir takes an exclusive flock(2) on dir; the kernel releases it when
// the process dies, so a reaper killed mid-reap blocks no one.
func lockDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := storefile.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

// renameFile is rename(2) without the extra lstat os.Rename makes: the hot
// path of every mutation renames twice.
func renameFile(from, to string) error {
	if err := unix.Rename(from, to); err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// unlinkFile is unlink(2) alone; os.Remove also tries rmdir on failure.
func unlinkFile(path string) error {
	if err := unix.Unlink(path); err != nil {
		return &os.PathError{Op: "unlink", Path: path, Err: err}
	}
	return nil
}

// removeDir is rmdir(2) alone.
func removeDir(path string) error {
	if err := unix.Rmdir(path); err != nil {
		return &os.PathError{Op: "rmdir", Path: path, Err: err}
	}
	return nil
}

// maxHolderBytes bounds a guard's holder file: ours is about 200 bytes.
const maxHolderBytes = 4 << 10

// Store files are opened through package storefile: no symlink followed,
// regular files only, never blocking, bounded reads.
var (
	flockRetry = storefile.Flock
	sameFile   = storefile.Same
)

// holderLock is a guard's holder.json, open with the exclusive flock that
// keeps the guard live while this process holds it. It is a bare
// descriptor: see [storefile.CreateLockedFd].
type holderLock struct{ fd int }

// Close releases the lock (the kernel drops it with the last descriptor).
func (l *holderLock) Close() error {
	if l.fd < 0 {
		return nil
	}
	err := unix.Close(l.fd)
	l.fd = -1
	return err
}

// isAt reports whether the file at path (not followed if a symlink) is
// this holder file.
func (l *holderLock) isAt(path string) bool { return storefile.SameFd(l.fd, path) }

// createLockedFile creates a holder file with data, locked before data is
// written.
func createLockedFile(path string, data []byte, perm storefile.Perm) (*holderLock, error) {
	fd, err := storefile.CreateLockedFd(path, data, perm)
	if err != nil {
		return nil, err
	}
	return &holderLock{fd: fd}, nil
}

// openHolderFile opens and reads a guard's holder file (at most
// maxHolderBytes), returned open for a lock test on the very inode read.
func openHolderFile(path string) (*os.File, []byte, error) {
	return storefile.OpenRead(path, maxHolderBytes)
}
