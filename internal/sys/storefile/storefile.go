// Package storefile opens the files of a lease store so that the store
// cannot be turned against its users: no symlink is followed at the last
// component, nothing but a regular file is read or written (a FIFO cannot
// block, a device cannot be read forever), reads are bounded, and what it
// creates gets exactly the store's permissions ([Perm]), whatever the
// umask.
package storefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

var (
	// ErrNotRegular reports a store path that is a symlink, a FIFO, a
	// device, a socket or a directory where a regular file belongs.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge reports a file over the read bound of its kind.
	ErrTooLarge = errors.New("file too large")
)

// Perm is the permission set of what a store creates: [Private] unless
// the store is a deliberate group store ([Group]). Files get exactly
// these bits, directories the same with search permission (and, for a
// group store, the set-group-ID bit, so that the group is inherited all
// the way down), whatever the process's umask.
type Perm uint32

const (
	// Private is for a store of one user: files 0600, directories 0700.
	Private Perm = 0o600
	// Group is for a group store (a directory of mode 2770): files 0660,
	// directories 2770, all of the directory's group.
	Group Perm = 0o660
)

// File is the mode of a file the store creates.
func (p Perm) File() uint32 { return uint32(p) & 0o666 }

// Dir is the mode of a directory the store creates.
func (p Perm) Dir() uint32 {
	d := p.File() | p.File()&0o444>>2
	if d&0o070 != 0 {
		d |= unix.S_ISGID
	}
	return d
}

// openFlags never follow a final symlink and never block on a FIFO.
const openFlags = unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC

func open(path string, flags int, perm Perm) (int, error) {
	return openWith(path, flags|openFlags, perm)
}

// openWith opens path; with O_CREAT, a file this process owns gets
// exactly perm's file mode (the umask narrows what open(2) creates; a
// file another member of a group store made is left as it is).
func openWith(path string, flags int, perm Perm) (int, error) {
	for {
		fd, err := unix.Open(path, flags, perm.File())
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ELOOP):
			return -1, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: a symbolic link", ErrNotRegular)}
		case errors.Is(err, unix.ENXIO):
			return -1, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: a FIFO or socket", ErrNotRegular)}
		case err != nil:
			return -1, &os.PathError{Op: "open", Path: path, Err: err}
		}
		if flags&(unix.O_CREAT|unix.O_EXCL) == unix.O_CREAT|unix.O_EXCL {
			// Created by this very call (O_EXCL fails on anything at
			// path, a symlink included): a new regular file.
			_ = unix.Fchmod(fd, perm.File())
			return fd, nil
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, &os.PathError{Op: "fstat", Path: path, Err: err}
		}
		if uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG {
			unix.Close(fd)
			return -1, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: %s", ErrNotRegular, kindOf(uint32(st.Mode)))}
		}
		if st.Nlink > 1 && flags&unix.O_NOFOLLOW != 0 {
			// A store file is made by this package or renamed into place,
			// never linked: another name for it is a hard link someone
			// planted (in a group store) to a file of the user's elsewhere,
			// which must be neither written, widened nor shown. (No link at
			// all is a file replaced by a rename since it was opened: the
			// whole older version, as lock-free readers expect.)
			unix.Close(fd)
			return -1, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: a file with %d hard links", ErrNotRegular, st.Nlink)}
		}
		if flags&unix.O_CREAT != 0 && uint32(st.Mode)&0o7777 != perm.File() && int(st.Uid) == unix.Geteuid() {
			// New, or older than the store's rule (a 0644 file of the
			// Node tool's): narrowed or widened to the store's mode.
			_ = unix.Fchmod(fd, perm.File())
		}
		return fd, nil
	}
}

// kindOf is DescribeMode of a raw st_mode.
func kindOf(mode uint32) string {
	var m fs.FileMode
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m = fs.ModeDir
	case unix.S_IFIFO:
		m = fs.ModeNamedPipe
	case unix.S_IFCHR:
		m = fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m = fs.ModeDevice
	case unix.S_IFSOCK:
		m = fs.ModeSocket
	case unix.S_IFLNK:
		m = fs.ModeSymlink
	default:
		m = fs.ModeIrregular
	}
	return DescribeMode(m | fs.FileMode(mode&0o777))
}

// Read returns the content of the regular file at path, at most max bytes;
// a longer file fails with ErrTooLarge, anything but a regular file with
// ErrNotRegular, a missing one with an error matching fs.ErrNotExist.
func Read(path string, max int) ([]byte, error) {
	fd, err := open(path, unix.O_RDONLY, Private)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return readFd(fd, path, max)
}

// ReadOwned is [Read] that also says who owns the file: the user whose
// process wrote it (a store file is written whole and renamed into place).
func ReadOwned(path string, max int) ([]byte, uint32, error) {
	fd, err := open(path, unix.O_RDONLY, Private)
	if err != nil {
		return nil, 0, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, 0, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	data, err := readFd(fd, path, max)
	return data, st.Uid, err
}

// OpenRead is [Read] that also returns the file, still open, so that the
// caller can lock or stat the very inode it read.
func OpenRead(path string, max int) (*os.File, []byte, error) {
	fd, err := open(path, unix.O_RDONLY, Private)
	if err != nil {
		return nil, nil, err
	}
	data, err := readFd(fd, path, max)
	if err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	return os.NewFile(uintptr(fd), path), data, nil
}

// ReadUserFile is [Read] for a file the user names (a pool or gate file):
// a symlink is followed, but a FIFO, a device or a huge file is refused
// all the same.
func ReadUserFile(path string, max int) ([]byte, error) {
	fd, err := openWith(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, Private)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return readFd(fd, path, max)
}

func readFd(fd int, path string, max int) ([]byte, error) {
	buf := make([]byte, 0, min(max+1, 512)) // a record is a few hundred bytes
	for {
		if len(buf) == cap(buf) {
			if len(buf) > max {
				return nil, tooLarge(fd, path, max)
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):min(cap(buf), max+1)])
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if len(buf) > max {
			return nil, tooLarge(fd, path, max)
		}
	}
}

// SizeError reports a file over the read bound of its kind, as a
// [*os.PathError]'s Err; it matches [ErrTooLarge]. Nothing was read of
// it: a caller must not take it for an empty or missing file.
type SizeError struct {
	// Size is the file's size as fstat saw it (at least Max+1).
	Size int64
	// Max is the bound, in bytes.
	Max int
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("%d bytes, over its read bound of %s", e.Size, Bytes(e.Max))
}

func (e *SizeError) Is(target error) bool { return target == ErrTooLarge }

// tooLarge is the error of a file over max bytes, open as fd.
func tooLarge(fd int, path string, max int) error {
	size := int64(max) + 1
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil && st.Size > size {
		size = st.Size
	}
	return &os.PathError{Op: "read", Path: path, Err: &SizeError{Size: size, Max: max}}
}

// Bytes says a bound in bytes for people: "4 MiB (4194304 bytes)", "256
// bytes".
func Bytes(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB (%d bytes)", n>>20, n)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB (%d bytes)", n>>10, n)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Append appends data to the regular file at path (created with perm if
// missing) with a single write, which O_APPEND keeps whole against
// concurrent appenders.
func Append(path string, data []byte, perm Perm) error {
	return writeClose(path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT, data, perm)
}

// WriteNew creates path with perm, which must not exist, and writes data
// to it.
func WriteNew(path string, data []byte, perm Perm) error {
	return writeClose(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, data, perm)
}

// CreateLocked creates path, which must not exist, takes an exclusive
// flock(2) on it before writing data, and returns it open: the lock lasts
// until the file is closed or the process dies, whichever comes first.
func CreateLocked(path string, data []byte, perm Perm) (*os.File, error) {
	fd, err := CreateLockedFd(path, data, perm)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// CreateLockedFd is [CreateLocked] returning the bare descriptor, which
// the caller closes with unix.Close: an *os.File would register it with
// the runtime's poller, which a short-lived process then starts for
// nothing (a regular file cannot be polled).
func CreateLockedFd(path string, data []byte, perm Perm) (int, error) {
	fd, err := open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, perm)
	if err != nil {
		return -1, err
	}
	if err := Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		return -1, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	if err := writeAll(fd, path, data); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// Flock is flock(2), retried on EINTR.
func Flock(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// Same reports whether path (not followed if a symlink) is the open file f.
func Same(f *os.File, path string) bool { return SameFd(int(f.Fd()), path) }

// SameFd reports whether path (not followed if a symlink) is the file
// open as fd.
func SameFd(fd int, path string) bool {
	var a, b unix.Stat_t
	if unix.Fstat(fd, &a) != nil || unix.Lstat(path, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// writeClose opens path with flags, writes data and closes it, reporting
// the first failure.
func writeClose(path string, flags int, data []byte, perm Perm) error {
	fd, err := open(path, flags, perm)
	if err != nil {
		return err
	}
	werr := writeAll(fd, path, data)
	if err := unix.Close(fd); werr == nil && err != nil {
		werr = &os.PathError{Op: "close", Path: path, Err: err}
	}
	return werr
}

// Replace writes data to a new temporary file beside path and renames it
// over path: readers see the old content or the new, never a torn file,
// and a symlink or FIFO at path is replaced, never written through.
func Replace(path, tmpName string, data []byte, perm Perm) error {
	tmp := filepath.Join(filepath.Dir(path), tmpName)
	if err := WriteNew(tmp, data, perm); err != nil {
		return err
	}
	if err := unix.Rename(tmp, path); err != nil {
		_ = unix.Unlink(tmp)
		return &os.LinkError{Op: "rename", Old: tmp, New: path, Err: err}
	}
	return nil
}

// OpenLock opens (creating it with perm if missing) a regular file used
// only for flock(2).
func OpenLock(path string, perm Perm) (*os.File, error) {
	fd, err := open(path, unix.O_RDWR|unix.O_CREAT, perm)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// Dir makes sure path, a directory of a store whose parent exists, is a
// real directory, creating it with perm's directory mode if missing; a
// symlink or anything else at path is refused, so nothing placed under it
// lands outside the store.
func Dir(path string, perm Perm) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := Mkdir(path, perm); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		fi, err = os.Lstat(path)
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		what := "not a directory"
		if fi.Mode()&fs.ModeSymlink != 0 {
			what = "a symbolic link"
		}
		return &os.PathError{Op: "mkdir", Path: path, Err: fmt.Errorf("%w: %s where a directory belongs", ErrNotRegular, what)}
	}
	return nil
}

// Mkdir creates the directory path (its parent must exist) with exactly
// perm's directory mode, whatever the umask. It fails with an error
// matching fs.ErrExist if anything is at path.
func Mkdir(path string, perm Perm) error {
	return MkdirMode(path, perm.Dir())
}

// MkdirMode is [Mkdir] with the directory's mode given outright (0755 for
// a directory every user reads and only its owner writes).
func MkdirMode(path string, mode uint32) error {
	if err := unix.Mkdir(path, mode&0o777); err != nil {
		return &os.PathError{Op: "mkdir", Path: path, Err: err}
	}
	if err := chmodDir(path, mode); err != nil {
		_ = unix.Rmdir(path)
		return &os.PathError{Op: "chmod", Path: path, Err: err}
	}
	return nil
}

// IsDir reports whether path is a real directory (not a symlink to one).
func IsDir(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.IsDir()
}

func writeAll(fd int, path string, data []byte) error {
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "write", Path: path, Err: err}
		}
		data = data[n:]
	}
	return nil
}
