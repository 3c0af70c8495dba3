//go:build unix

package pool

import (
	"context"
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/storefile"
)

// localLockFile serializes this implementation's processes before they take
// the queue lock lease. It is not part of the shared protocol: other
// implementations ignore it and still meet the lease. Without it, every
// release of a busy queue lock woke every waiting process at once, and
// their races for the lease's guard directory starved some of them for
// tens of seconds; waiters blocked in flock(2) queue in the kernel instead.
const localLockFile = ".queue.flock"

// lockLocal takes an exclusive flock on the pool's local lock file,
// waiting until ctx ends. The kernel drops it if the process dies.
func (p *Pool) lockLocal(ctx context.Context) (unlock func(), err error) {
	if err := p.ensureDir(p.dir); err != nil {
		return nil, err
	}
	f, err := storefile.OpenLock(filepath.Join(p.dir, localLockFile))
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	release := func() {
		_ = unix.Flock(fd, unix.LOCK_UN)
		f.Close()
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err == nil {
		return release, nil
	} else if !errors.Is(err, unix.EWOULDBLOCK) {
		f.Close()
		return nil, err
	}
	got := make(chan error, 1)
	go func() {
		for {
			err := unix.Flock(fd, unix.LOCK_EX)
			if !errors.Is(err, unix.EINTR) {
				got <- err
				return
			}
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, err
		}
		return release, nil
	case <-ctx.Done():
		// The blocked flock cannot be interrupted; give the lock back as
		// soon as it is granted.
		go func() {
			if <-got == nil {
				release()
			} else {
				f.Close()
			}
		}()
		return nil, ctx.Err()
	}
}
