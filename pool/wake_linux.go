//go:build linux

package pool

import (
	"context"
	"encoding/binary"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Event masks of a waiter's inotify watches. Every file of the protocol
// that a waiter cares about is replaced by rename or removed (records,
// queue.json: section 6.1), so only names moving or going away wake it:
// the writes of temporaries, the appends to pool.log and the guard
// directories' creation do not. A change to a slot record is its removal
// (release, reap) or its replacement (acquire, takeover); a change to the
// queue is a rename onto queue.json.
const (
	storeMask = unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO
	poolMask  = unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
)

// Watch returns the waiter's wake-ups, from one inotify descriptor with a
// watch on the pool directory (queue.json) and, while listen(true), one on
// the store directory (the slot records). It never fails: without events
// the channels stay silent and waiters poll. stop releases the descriptor
// (in the background: closing an inotify descriptor waits for the
// kernel, which took milliseconds, between a grant and its caller).
func (d *dirState) Watch(ctx context.Context, slotKinds []string) (Wakeups, func()) {
	slots, queue := make(chan struct{}, 1), make(chan struct{}, 1)
	wk := Wakeups{Slots: slots, Queue: queue, Listen: func(bool) {}}
	signal := func(ch chan struct{}) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	// The pool directory must exist to be watched; creating it is harmless
	// (every waiter writes there right after).
	_, _ = d.ensureDir(d.dir)
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return wk, func() {}
	}
	poolWd, err := unix.InotifyAddWatch(fd, d.dir, poolMask|unix.IN_ONLYDIR)
	if err != nil {
		unix.Close(fd)
		return wk, func() {}
	}
	var storeWd atomic.Int32
	storeWd.Store(-1)
	var mu sync.Mutex
	wk.Listen = func(on bool) {
		mu.Lock()
		defer mu.Unlock()
		cur := int(storeWd.Load())
		switch {
		case on && cur < 0:
			wd, err := unix.InotifyAddWatch(fd, d.p.store.Dir(), storeMask|unix.IN_ONLYDIR)
			if err != nil {
				signal(slots) // not watched: the poll remains, and a re-check now
				return
			}
			storeWd.Store(int32(wd))
		case !on && cur >= 0:
			storeWd.Store(-1)
			_, _ = unix.InotifyRmWatch(fd, uint32(cur))
		}
	}
	wk.Listen(true)
	slotNames := make(map[string]bool, len(slotKinds))
	for _, kind := range slotKinds {
		slotNames[kind+".json"] = true
	}
	// A non-blocking descriptor handed to os.NewFile joins the runtime
	// poller, so Close interrupts a pending Read.
	f := os.NewFile(uintptr(fd), "inotify")
	var once sync.Once
	stop := func() { once.Do(func() { go f.Close() }) }
	go func() {
		<-ctx.Done()
		stop()
	}()
	go func() {
		buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
		for {
			n, err := f.Read(buf)
			if err != nil {
				return // closed, or the watch is broken: waiters still poll
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				// struct inotify_event: int32 wd, uint32 mask, uint32 cookie, uint32 len, name.
				wd := int32(binary.NativeEndian.Uint32(buf[off:]))
				mask := binary.NativeEndian.Uint32(buf[off+4:])
				nameLen := int(binary.NativeEndian.Uint32(buf[off+12:]))
				start := off + unix.SizeofInotifyEvent
				off = start + nameLen
				if off > n {
					break
				}
				name := strings.TrimRight(string(buf[start:off]), "\x00")
				switch {
				case mask&unix.IN_Q_OVERFLOW != 0:
					// An overflow may hide a release: wake and re-check.
					signal(slots)
					signal(queue)
				case wd == int32(poolWd) && (mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED) != 0 || name == QueueFile):
					signal(queue)
				case wd == storeWd.Load() && wd >= 0 && (mask&unix.IN_IGNORED != 0 || slotNames[name]):
					signal(slots)
				}
			}
		}
	}()
	return wk, stop
}
