//go:build linux

package dirpool

import (
	"context"
	"os"
	"sync"
	"sync/atomic"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/internal/sys/inotify"
	"github.com/durable-lease/durable-lease/pool"
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
func (d *dirState) Watch(ctx context.Context, slotKinds []string) (pool.Wakeups, func()) {
	slots, queue := make(chan struct{}, 1), make(chan struct{}, 1)
	wk := pool.Wakeups{Slots: slots, Queue: queue, Listen: func(bool) {}}
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
			wd, err := unix.InotifyAddWatch(fd, d.h.Store.Dir(), storeMask|unix.IN_ONLYDIR)
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
		buf := make([]byte, inotify.BufferSize)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return // closed, or the watch is broken: waiters still poll
			}
			inotify.Each(buf[:n], func(wd int32, mask uint32, name string) bool {
				switch {
				case mask&unix.IN_Q_OVERFLOW != 0:
					// An overflow may hide a release: wake and re-check.
					signal(slots)
					signal(queue)
				case wd == int32(poolWd) && (mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED) != 0 || name == pool.QueueFile):
					signal(queue)
				case wd == storeWd.Load() && wd >= 0 && (mask&unix.IN_IGNORED != 0 || slotNames[name]):
					signal(slots)
				}
				return true
			})
		}
	}()
	return wk, stop
}

// WatchEntry returns the wake-ups of the waiter of entry id, which need
// no watch of queue.json: Queue is its bell (bell_unix.go), rung when a
// change of the queue moves it near the front, and Slots an inotify watch
// of the store directory, made only once Listen(true) says the waiter
// could be granted a slot (few waiters are, so a queue of hundreds stays
// within the host's limit of inotify instances), or in a pool of one slot
// held by this implementation that slot's bell in the store ([slotBell]).
// If the bell cannot be made it falls back to [dirState.Watch].
func (d *dirState) WatchEntry(ctx context.Context, id string, slotKinds []string) (pool.Wakeups, func()) {
	perm, err := d.ensureDir(d.dir)
	if err != nil || pool.CheckRequestID(id) != nil {
		return d.Watch(ctx, slotKinds)
	}
	path := d.bellPath(id)
	if err := unix.Mkfifo(path, perm.File()); err != nil {
		return d.Watch(ctx, slotKinds)
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	var st unix.Stat_t
	if err == nil && (unix.Fstat(fd, &st) != nil || uint32(st.Mode)&unix.S_IFMT != unix.S_IFIFO) {
		unix.Close(fd)
		err = unix.EINVAL
	}
	if err != nil {
		_ = unix.Unlink(path)
		return d.Watch(ctx, slotKinds)
	}
	_ = unix.Fchmod(fd, perm.File())
	slots, queue := make(chan struct{}, 1), make(chan struct{}, 1)
	signal := func(ch chan struct{}) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	bell := os.NewFile(uintptr(fd), path) // non-blocking: joins the poller, Close interrupts a Read
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := bell.Read(buf); err != nil {
				return
			}
			signal(queue)
		}
	}()
	var mu sync.Mutex
	var ino *os.File
	listen := func(on bool) {
		mu.Lock()
		defer mu.Unlock()
		if !on || ino != nil {
			return
		}
		if f := d.slotBell(ctx, slotKinds, func() { signal(slots) }); f != nil {
			ino = f
			return
		}
		f, err := d.watchSlots(slotKinds, func() { signal(slots) })
		if err != nil {
			signal(slots) // not watched: the poll remains, and a re-check now
			return
		}
		ino = f
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = unix.Unlink(path)
			bell.Close()
			mu.Lock()
			if ino != nil {
				go ino.Close() // see Watch (a bell closes at once)
			}
			mu.Unlock()
		})
	}
	go func() {
		<-ctx.Done()
		stop()
	}()
	return pool.Wakeups{Slots: slots, Queue: queue, Listen: listen}, stop
}

// watchSlots starts an inotify watch of the store directory that calls
// wake on a change to one of the slots' records; closing the file ends it.
func (d *dirState) watchSlots(slotKinds []string, wake func()) (*os.File, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	if _, err := unix.InotifyAddWatch(fd, d.h.Store.Dir(), storeMask|unix.IN_ONLYDIR); err != nil {
		unix.Close(fd)
		return nil, err
	}
	names := make(map[string]bool, len(slotKinds))
	for _, kind := range slotKinds {
		names[kind+".json"] = true
	}
	f := os.NewFile(uintptr(fd), "inotify")
	go func() {
		buf := make([]byte, inotify.BufferSize)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			inotify.Each(buf[:n], func(_ int32, mask uint32, name string) bool {
				if mask&(unix.IN_Q_OVERFLOW|unix.IN_IGNORED) != 0 || names[name] {
					wake()
				}
				return true
			})
		}
	}()
	return f, nil
}

var _ pool.EntryWatcher = (*dirState)(nil)

// slotBell opens the bell of the one slot of a pool of one slot
// (dirstore.Backend.OpenBell), rung by every release, reap and forced
// release of this implementation once it has moved the slot's guard away, and
// reads it, calling wake on each ring. It is used only when the slot's
// record is one whose removal rings (dirstore.Rings); otherwise, and for
// a pool of more slots, it returns nil and the slots are watched with
// inotify. More slots would need every waiter that could be granted one
// to hear each ring, and a ring is one byte read by one reader; with one
// slot only the first live entry can be granted, and the one before it
// stops reading when it wins the slot. Without inotify the waiter's exit
// does not wait for the kernel to tear an inotify instance down.
func (d *dirState) slotBell(ctx context.Context, slotKinds []string, wake func()) *os.File {
	if len(slotKinds) != 1 {
		return nil
	}
	b, ok := d.h.Store.Backend().(*dirstore.Backend)
	if !ok {
		return nil
	}
	if rec, err := b.Peek(ctx, slotKinds[0]); err != nil || !dirstore.Rings(rec) {
		return nil
	}
	f, err := b.OpenBell(slotKinds[0])
	if err != nil {
		return nil
	}
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := f.Read(buf); err != nil {
				return
			}
			wake()
		}
	}()
	return f
}
