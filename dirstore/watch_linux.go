package dirstore

import (
	"context"
	"os"

	"github.com/durable-lease/durable-lease/internal/sys/inotify"
	"github.com/durable-lease/durable-lease/lease"
	"golang.org/x/sys/unix"
)

// Watch implements [lease.Watcher]. The waiter reads kind's bell
// (bell_unix.go), which this implementation's releases, reaps and forced
// releases ring once they have moved the guard away, so the waiter wakes
// to a free guard. When the record held now was not written by this
// implementation (it has no boot stamp: the Node tool's, or one
// unreadable), or there is none, or the bell cannot be used, the waiter
// also watches the store directory with inotify: the removal of
// <kind>.json (a release or a reap, by anyone) wakes it. Writes are not
// watched: a record written is a lease taken or refreshed, which frees
// nothing, and waking every waiter on each of them makes a herd.
//
// The inotify watch is not made for a record of ours because tearing an
// inotify instance down waits for the kernel's fsnotify grace period
// (several milliseconds here), and a process exits only after every
// descriptor is closed: a `lease acquire --wait-ms` that held a watch
// exits that much later than it holds.
func (b *Backend) Watch(ctx context.Context, kind string) (<-chan struct{}, error) {
	ch := make(chan struct{}, 1)
	signal := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	bell, berr := b.openBell(kind)
	foreign := true
	if berr == nil {
		if rec, err := b.Peek(ctx, kind); err == nil && Rings(rec) {
			foreign = false
		}
	}
	var ino *os.File
	if foreign {
		f, err := b.watchDir(kind, signal)
		if err != nil && bell == nil {
			return nil, err
		}
		ino = f
	}
	if bell != nil {
		go func() {
			buf := make([]byte, 64)
			for {
				if _, err := bell.Read(buf); err != nil {
					return // closed by ctx: waiters still poll
				}
				signal()
			}
		}()
	}
	go func() {
		<-ctx.Done()
		if bell != nil {
			bell.Close()
		}
		if ino != nil {
			ino.Close()
		}
	}()
	return ch, nil
}

// watchDir watches the store directory with inotify for the removal of
// kind's record, calling signal on each, until the returned file is
// closed.
func (b *Backend) watchDir(kind string, signal func()) (*os.File, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	mask := uint32(unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_DELETE_SELF)
	if _, err := unix.InotifyAddWatch(fd, b.dir, mask); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// A non-blocking descriptor handed to os.NewFile joins the runtime
	// poller, so Close interrupts a pending Read.
	f := os.NewFile(uintptr(fd), "inotify")
	go func() {
		name := kind + ".json"
		buf := make([]byte, inotify.BufferSize)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return // closed, or the watch is broken: waiters still poll
			}
			if eventNamed(buf[:n], name) {
				signal()
			}
		}
	}()
	return f, nil
}

// eventNamed reports whether a batch of inotify events mentions name, or the
// watched directory itself went away.
func eventNamed(buf []byte, name string) bool {
	found := false
	inotify.Each(buf, func(_ int32, mask uint32, n string) bool {
		found = mask&(unix.IN_DELETE_SELF|unix.IN_Q_OVERFLOW|unix.IN_IGNORED) != 0 || n == name
		return !found
	})
	return found
}

var _ lease.Watcher = (*Backend)(nil)
