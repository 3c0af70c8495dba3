//go:build unix

package dirpool

import (
	"context"
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/sys/storefile"
)

// lockLocal takes an exclusive flock(2) on the pool's directory itself,
// waiting until ctx ends; the kernel drops it if the process dies. This
// implementation's processes take it before the queue lock lease. It is
// not part of the shared protocol and adds no file to the pool directory:
// other implementations never see it and still meet the lease. Without
// it, every release of a busy queue lock woke every waiting process at
// once, and their races for the lease's guard directory starved some of
// them for tens of seconds; waiters blocked in flock(2) queue in the
// kernel instead.
func (d *dirState) lockLocal(ctx context.Context) (unlock func(), err error) {
	if _, err := d.ensureDir(d.dir); err != nil {
		return nil, err
	}
	f, err := openDir(d.dir)
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
	go func() { got <- storefile.Flock(fd, unix.LOCK_EX) }()
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

// openDir opens the directory dir for flock(2): read-only, never through
// a symlink at the last component, and only if it is a directory.
func openDir(dir string) (*os.File, error) {
	for {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: dir, Err: err}
		}
		return os.NewFile(uintptr(fd), dir), nil
	}
}
