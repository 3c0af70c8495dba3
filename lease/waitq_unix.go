//go:build unix

package lease

import (
	"errors"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/storefile"
)

// waitFileName is the name of kind's wait file in the store,
// .wait-<kind>.flock: the line of this implementation's
// waiters on that kind (see [Store.AcquireWait]). The file is empty and
// only ever flock(2)ed; it is created by the first waiter that has to wait
// and never removed (removing a lock file lets two processes lock two
// different inodes of one name). Readers skip it, as every name starting
// with a dot.
func waitFileName(kind string) string { return ".wait-" + kind + ".flock" }

// lineUp implements [waitLiner] with an exclusive flock(2) on kind's wait
// file: the kernel queues the waiters blocked in it, and the one holding it
// is the head. The file is opened like every store file (no symlink, a
// regular file only, never blocking on open); anything else there makes the
// line unusable and the caller waits without it.
func (b *fileBackend) lineUp(kind string) (<-chan error, func(), error) {
	f, err := storefile.OpenLock(filepath.Join(b.dir, waitFileName(kind)))
	if err != nil {
		return nil, nil, err
	}
	fd := int(f.Fd())
	turn := make(chan error, 1)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err == nil {
		// Nobody waits: this waiter is the head at once.
		turn <- nil
		var once sync.Once
		return turn, func() {
			once.Do(func() {
				_ = unix.Flock(fd, unix.LOCK_UN)
				f.Close()
			})
		}, nil
	} else if !errors.Is(err, unix.EWOULDBLOCK) {
		f.Close()
		return nil, nil, err
	}
	// A goroutine blocked in flock(2) cannot be interrupted, and the
	// descriptor must stay open while it is: the waiter may leave first
	// (ctx ended, or it won the lease as a racer), and then the turn is
	// passed on as soon as the kernel grants it.
	got := make(chan error, 1)
	go func() { got <- flockRetry(fd, unix.LOCK_EX) }()
	left := make(chan struct{})
	go func() {
		var err error
		select {
		case err = <-got:
			turn <- err
			<-left
		case <-left:
			err = <-got
		}
		if err == nil {
			_ = unix.Flock(fd, unix.LOCK_UN)
		}
		f.Close()
	}()
	var once sync.Once
	return turn, func() { once.Do(func() { close(left) }) }, nil
}
