//go:build unix

package lease

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// writeNewFile creates path, which must not exist, and writes data to it.
func writeNewFile(path string, data []byte) error {
	fd, err := openRetry(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o666)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			unix.Close(fd)
			return &os.PathError{Op: "write", Path: path, Err: err}
		}
		data = data[n:]
	}
	if err := unix.Close(fd); err != nil {
		return &os.PathError{Op: "close", Path: path, Err: err}
	}
	return nil
}

func openRetry(path string, flags int, perm uint32) (int, error) {
	for {
		fd, err := unix.Open(path, flags, perm)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// lockDir takes an exclusive flock(2) on dir; the kernel releases it when
// the process dies, so a reaper killed mid-reap blocks no one.
func lockDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
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

// createLockedFile creates path, which must not exist, takes an exclusive
// flock(2) on it before writing data, and returns it open: the lock lasts
// until the file is closed or the process dies, whichever comes first.
func createLockedFile(path string, data []byte) (*os.File, error) {
	fd, err := openRetry(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o666)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	if err := flockRetry(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			f.Close()
			return nil, &os.PathError{Op: "write", Path: path, Err: err}
		}
		data = data[n:]
	}
	return f, nil
}

func flockRetry(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// maxHolderBytes bounds a guard's holder file: ours is about 200 bytes.
const maxHolderBytes = 4 << 10

// openHolderFile opens a guard's holder file for reading without following
// a symlink or blocking on a FIFO, refuses anything but a regular file, and
// reads at most maxHolderBytes of it. The file is returned open, for a
// lock test on the very inode that was read.
func openHolderFile(path string) (*os.File, []byte, error) {
	fd, err := openRetry(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, nil, &os.PathError{Op: "open", Path: path, Err: unix.EINVAL}
	}
	buf := make([]byte, maxHolderBytes+1)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || m == 0 {
			break
		}
		n += m
	}
	if n > maxHolderBytes {
		f.Close()
		return nil, nil, &os.PathError{Op: "read", Path: path, Err: unix.EFBIG}
	}
	return f, buf[:n], nil
}

// sameFile reports whether path (not followed if a symlink) is the open
// file f.
func sameFile(f *os.File, path string) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Lstat(path, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}
