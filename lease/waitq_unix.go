//go:build unix

package lease

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/storefile"
)

// linePoll is how often a waiter behind the head tries for the line's
// lock: the turn passes within about this long of the head leaving.
const linePoll = 5 * time.Millisecond

// waitFileName is the name of kind's wait file in the store,
// .wait-<kind>.flock: the line of this implementation's
// waiters on that kind (see [Store.AcquireWait]). The file is empty and
// only ever flock(2)ed; it is created by the first waiter that has to wait
// and never removed (removing a lock file lets two processes lock two
// different inodes of one name). Readers skip it, as every name starting
// with a dot.
func waitFileName(kind string) string { return ".wait-" + kind + ".flock" }

// lineUp implements [waitLiner] with an exclusive flock(2) on kind's wait
// file: the waiter holding it is the head, and the others try for it every
// linePoll. The file is opened like every store file (no symlink, a
// regular file only, never blocking on open); anything else there makes the
// line unusable and the caller waits without it.
func (b *fileBackend) lineUp(kind string) (<-chan error, func(), error) {
	f, err := storefile.OpenLock(filepath.Join(b.dir, waitFileName(kind)), b.perm())
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
	// Not at the head: try for the lock every linePoll, rather than in a
	// blocking flock(2), which no cancellation can interrupt: a waiter that
	// gives up must not leave a thread and a descriptor blocked behind a
	// head that may hold the line for as long as the lease is held.
	left := make(chan struct{})
	go func() {
		defer f.Close()
		t := time.NewTimer(linePoll/2 + rand.N(linePoll))
		defer t.Stop()
		for {
			select {
			case <-left:
				return
			case <-t.C:
			}
			err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
			if err == nil || !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
				turn <- err
				<-left
				if err == nil {
					_ = unix.Flock(fd, unix.LOCK_UN)
				}
				return
			}
			t.Reset(linePoll/2 + rand.N(linePoll))
		}
	}()
	var once sync.Once
	return turn, func() { once.Do(func() { close(left) }) }, nil
}
