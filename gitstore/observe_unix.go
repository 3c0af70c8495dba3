//go:build unix

package gitstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// lockPatience bounds the wait for the state file's lock, which a process
// holds only to read and rewrite a small file: one that keeps it longer
// (stopped, say) leaves this call to memory.
const lockPatience = 2 * time.Second

func ownedByMe(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// openPrivate opens a file of the state directory without following a
// symbolic link and checks that it is a regular file of this user.
func openPrivate(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && (!fi.Mode().IsRegular() || !ownedByMe(fi)) {
		err = fmt.Errorf("%w: %s is not a regular file of this user", errStateDir, path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (o *observations) updateFile(fn func(map[string]sighting) bool) error {
	if err := checkStateDir(filepath.Dir(o.path)); err != nil {
		return err
	}
	lock, err := openPrivate(o.path+".lock", os.O_RDWR|os.O_CREATE)
	if err != nil {
		return err
	}
	defer lock.Close()
	for deadline := time.Now().Add(lockPatience); ; {
		err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gitstore: %s stayed locked for %s", o.path, lockPatience)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var data []byte
	if f, err := openPrivate(o.path, os.O_RDONLY); err == nil {
		data, err = io.ReadAll(io.LimitReader(f, maxStateBytes+1))
		f.Close()
		if err != nil {
			return err
		}
		if len(data) > maxStateBytes {
			data = nil // not ours to read: start again
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	kinds := decodeState(data, o.store)
	if !fn(kinds) {
		return nil
	}
	out, err := encodeState(o.store, kinds)
	if err != nil {
		return err
	}
	tmp := o.path + ".tmp"
	f, err := openPrivate(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.Write(out)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, o.path)
	}
	return err
}
