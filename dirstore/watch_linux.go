package dirstore

import (
	"context"
	"encoding/binary"
	"os"
	"strings"

	"github.com/durable-lease/durable-lease/lease"
	"golang.org/x/sys/unix"
)

// Watch implements [lease.Watcher] with inotify on the store directory: the
// removal of <kind>.json (a release or a reap) wakes the waiter. Writes are
// not watched: a record written is a lease taken or refreshed, which frees
// nothing, and waking every waiter on each of them makes a herd.
func (b *Backend) Watch(ctx context.Context, kind string) (<-chan struct{}, error) {
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
	// poller, so Close below interrupts a pending Read.
	f := os.NewFile(uintptr(fd), "inotify")
	ch := make(chan struct{}, 1)
	go func() {
		<-ctx.Done()
		f.Close()
	}()
	go func() {
		name := kind + ".json"
		buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
		for {
			n, err := f.Read(buf)
			if err != nil {
				return // closed by ctx, or the watch is broken: waiters still poll
			}
			if eventNamed(buf[:n], name) {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
	}()
	return ch, nil
}

// eventNamed reports whether a batch of inotify events mentions name, or the
// watched directory itself went away.
func eventNamed(buf []byte, name string) bool {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		// struct inotify_event: int32 wd, uint32 mask, uint32 cookie, uint32 len, name.
		mask := binary.NativeEndian.Uint32(buf[off+4:])
		nameLen := int(binary.NativeEndian.Uint32(buf[off+12:]))
		start := off + unix.SizeofInotifyEvent
		if mask&(unix.IN_DELETE_SELF|unix.IN_Q_OVERFLOW|unix.IN_IGNORED) != 0 {
			return true
		}
		if start+nameLen <= len(buf) && strings.TrimRight(string(buf[start:start+nameLen]), "\x00") == name {
			return true
		}
		off = start + nameLen
	}
	return false
}

var _ lease.Watcher = (*Backend)(nil)
