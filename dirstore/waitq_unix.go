//go:build unix

package dirstore

import (
	"context"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/sys/storefile"
	"github.com/durable-lease/durable-lease/lease"
)

// waitFileName is the name of kind's wait file in the store,
// .wait-<kind>.flock: the line of this implementation's
// waiters on that kind (see [Store.AcquireWait]). The file is empty and
// only ever flock(2)ed; it is created by the first waiter that has to wait
// and never removed (removing a lock file lets two processes lock two
// different inodes of one name). Readers skip it, as every name starting
// with a dot.
func waitFileName(kind string) string { return ".wait-" + kind + ".flock" }

// LineUp implements [lease.WaitLiner] with an exclusive flock(2) on kind's wait
// file: the waiter holding it is the head. The processes waiting for it
// block in flock(2), so the kernel wakes one of them when the head leaves
// and none before: an idle line costs nothing. Within a process the
// waiters of one wait file share one descriptor and one goroutine
// ([line]), which alone blocks in the kernel and hands the turn to the
// process's waiters in order. A blocked flock(2) cannot be interrupted, so
// a waiter that gives up leaves that goroutine blocked until the process's
// turn comes (then it passes the turn on at once): at most one thread and
// one descriptor per wait file and process, however many waits gave up.
// The file is opened like every store file (no symlink, a regular file
// only, never blocking on open); anything else there makes the line
// unusable and the caller waits without it.
func (b *Backend) LineUp(_ context.Context, kind string) (lease.Place, error) {
	path := filepath.Join(b.dir, waitFileName(kind))
	lines.Lock()
	defer lines.Unlock()
	ln := lines.m[path]
	if ln == nil {
		f, err := storefile.OpenLock(path, b.perm())
		if err != nil {
			return lease.Place{}, err
		}
		ln = &line{path: path, f: f}
		lines.m[path] = ln
		go ln.serve()
	}
	w := &lineWaiter{turn: make(chan error, 1), done: make(chan struct{})}
	ln.waiting = append(ln.waiting, w)
	var once sync.Once
	return lease.Place{Turn: w.turn, Leave: func() { once.Do(func() { ln.leave(w) }) }}, nil
}

// lines are this process's lines, by wait file.
var lines = struct {
	sync.Mutex
	m map[string]*line
}{m: map[string]*line{}}

// line is a process's place in the line of one wait file: one descriptor,
// and one goroutine that takes the lock for the process's first waiter,
// holds it until that waiter leaves, and goes on while any waits.
type line struct {
	path    string
	f       *os.File
	waiting []*lineWaiter // in order; guarded by lines
}

type lineWaiter struct {
	turn chan error
	done chan struct{} // closed by leave
}

// leave takes w out of the line, or ends its turn.
func (ln *line) leave(w *lineWaiter) {
	lines.Lock()
	defer lines.Unlock()
	for i, x := range ln.waiting {
		if x == w {
			ln.waiting = append(ln.waiting[:i], ln.waiting[i+1:]...)
			break
		}
	}
	close(w.done)
}

// serve runs the process's side of the line until nobody of this process
// waits on it.
func (ln *line) serve() {
	fd := int(ln.f.Fd())
	for {
		err := storefile.Flock(fd, unix.LOCK_EX) // blocks: the kernel queues us
		lines.Lock()
		var w *lineWaiter
		for len(ln.waiting) > 0 && w == nil {
			w, ln.waiting = ln.waiting[0], ln.waiting[1:]
			select {
			case <-w.done:
				w = nil // it left while we waited for the lock
			default:
			}
		}
		if w == nil {
			// Everyone of this process gave up: pass the turn on.
			delete(lines.m, ln.path)
			lines.Unlock()
			if err == nil {
				_ = unix.Flock(fd, unix.LOCK_UN)
			}
			ln.f.Close()
			return
		}
		lines.Unlock()
		w.turn <- err
		if err != nil {
			// The line cannot be used: every waiter of this process is
			// told, and waits without it.
			lines.Lock()
			rest := ln.waiting
			ln.waiting = nil
			delete(lines.m, ln.path)
			lines.Unlock()
			for _, x := range rest {
				x.turn <- err
			}
			ln.f.Close()
			return
		}
		<-w.done
		_ = unix.Flock(fd, unix.LOCK_UN)
	}
}

var _ lease.WaitLiner = (*Backend)(nil)
