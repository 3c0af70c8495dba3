//go:build unix

package dirstore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/lease"
)

// bellFileName is the name of kind's bell in the store, .bell-<kind>: a
// FIFO that the head of kind's line reads while it waits, and that this
// implementation's mutations write one byte to when they have removed
// kind's record and moved its guard away (docs/PROTOCOL.md §4.2). It is made by
// the first waiter that watches the kind and never removed, as the wait
// file: a head that removed it as it left could remove the next head's.
// Readers skip it, as every name starting with a dot.
func bellFileName(kind string) string { return ".bell-" + kind }

// openBell opens kind's bell for reading, making it if missing. The
// descriptor is open for writing too, so that a read waits for a ring
// instead of ending at once while nobody has it open for writing; it is
// non-blocking, so it joins the runtime poller and Close interrupts a Read.
// Anything but a FIFO at the path is refused and left alone.
func (b *Backend) openBell(kind string) (*os.File, error) {
	path := filepath.Join(b.dir, bellFileName(kind))
	perm := b.perm()
	made := true
	if err := unix.Mkfifo(path, perm.File()); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		made = false
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || uint32(st.Mode)&unix.S_IFMT != unix.S_IFIFO {
		unix.Close(fd)
		return nil, &os.PathError{Op: "open", Path: path, Err: errors.New("not a FIFO")}
	}
	if made {
		_ = unix.Fchmod(fd, perm.File()) // the umask narrowed mkfifo's mode
	}
	return os.NewFile(uintptr(fd), path), nil
}

// ring wakes whoever reads kind's bell: one byte, never blocking. No bell
// (nobody ever watched the kind), or a bell nobody reads (ENXIO), is the
// common case and costs one failed open. A name that is not a FIFO is
// opened without being written to.
func (b *Backend) ring(kind string) {
	fd, err := unix.Open(filepath.Join(b.dir, bellFileName(kind)), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || uint32(st.Mode)&unix.S_IFMT != unix.S_IFIFO {
		return
	}
	_, _ = unix.Write(fd, []byte{1}) // EAGAIN: rung already and not yet read
}

// OpenBell opens kind's bell for reading, as the head of kind's line
// does; a waiter of a pool of one slot reads its slot's bell so
// (dirstore/dirpool). The file is non-blocking and joins the runtime
// poller; the caller reads it and closes it.
func (b *Backend) OpenBell(kind string) (*os.File, error) { return b.openBell(kind) }

// Rings reports whether rec is a record whose release rings its kind's
// bell: one written by this implementation, which stamps its records with
// the boot clock (lease.Record.Boot) and rings on every removal. A record
// of another tool (the Node tool's) or an unreadable one may go away
// without a ring, and is watched with inotify as well.
func Rings(rec *lease.Record) bool { return rec != nil && !rec.Corrupt && rec.Boot != nil }
