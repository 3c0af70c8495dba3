package lease

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/storefile"
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
		tmp := path + ".new-" + randomHex(8)
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

// self describes this process as a guard holder.
var self = sync.OnceValue(func() guardHolder {
	h := guardHolder{PID: os.Getpid()}
	h.Host, _ = os.Hostname()
	h.Boot = kernelBootID()
	h.PIDNS, _ = os.Readlink("/proc/self/ns/pid")
	if st, _, err := procStat(h.PID); err == nil {
		h.Start = st
	}
	return h
})

// holderAlive reports whether a guard holder is still running. known is
// false when this process cannot tell: the holder did not record its full
// identity, or it lives on another host or in another pid namespace.
func holderAlive(h *guardHolder) (alive bool, reason string, known bool) {
	me := self()
	if h.Boot == "" || h.PIDNS == "" || h.Start == 0 || me.Boot == "" || me.PIDNS == "" || h.Host != me.Host {
		return false, "", false
	}
	if h.Boot != me.Boot {
		return false, "holder ran before the last reboot", true
	}
	if h.PIDNS != me.PIDNS {
		return false, "", false
	}
	start, state, err := procStat(h.PID)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, fmt.Sprintf("holder pid %d has exited", h.PID), true
	case err != nil:
		return false, "", false
	case start != h.Start:
		return false, fmt.Sprintf("holder pid %d was reused by another process", h.PID), true
	case state == 'Z' || state == 'X':
		return false, fmt.Sprintf("holder pid %d is a zombie", h.PID), true
	}
	return true, "", true
}

// procStat reads a process's start time (clock ticks since boot, field 22 of
// /proc/<pid>/stat) and its state letter.
func procStat(pid int) (start uint64, state byte, err error) {
	data, err := readProcFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) may hold spaces and parentheses; the fields
	// after it start after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("lease: malformed /proc/%d/stat", pid)
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, 0, fmt.Errorf("lease: malformed /proc/%d/stat", pid)
	}
	start, err = strconv.ParseUint(fields[19], 10, 64)
	return start, fields[0][0], err
}
