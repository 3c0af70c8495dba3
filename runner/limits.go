package runner

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// ownDescriptors is about how many descriptors pool-run and its guardian
// open beside those they inherit: the guardian's four (its socket,
// pool-run's stderr, the terminal, the cgroup), the socket's other end,
// a pseudo-terminal's two per stream, the runtime's poller and signal
// pipe, the store's files, a watch. A limit that does not leave room for
// them fails a run after it acquired: it is refused before instead.
const ownDescriptors = 24

// guardianDescriptors are the guardian's own descriptors, numbered right
// above the highest one it passes on: its socket, pool-run's stderr, the
// terminal, the cgroup.
const guardianDescriptors = 4

// ErrLimit reports a resource limit that would make the run fail after
// acquiring (ulimit -n): nothing was acquired.
var ErrLimit = errors.New("runner: a resource limit is too low for a run")

// checkDescriptors refuses a run whose descriptor limit (RLIMIT_NOFILE,
// as the Go runtime raised it to the hard limit) leaves no room above the
// descriptors it inherited, which reach the work in place.
func checkDescriptors() error {
	var r unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &r) != nil || uint64(r.Cur) >= 1<<40 {
		return nil // unreadable, or as good as infinite
	}
	limit := uint64(r.Cur) // int64 on some systems, uint64 on others
	high, open := 2, 3
	for _, f := range inheritedFiles() {
		if f != nil {
			high, open = max(high, int(f.Fd())), open+1
		}
	}
	// The guardian's four descriptors go right above the highest
	// inherited one; pool-run's own take free numbers wherever they are.
	need := uint64(max(high+1+guardianDescriptors, open+ownDescriptors))
	if limit < need {
		return fmt.Errorf("%w: the descriptor limit (ulimit -n) is %d; pool-run needs %d (%d descriptors are inherited and passed on to the work, up to descriptor %d, and it opens about %d of its own)",
			ErrLimit, limit, need, open, high, ownDescriptors)
	}
	return nil
}

// limitHint names the limit behind a failed fork or open: a process
// limit (EAGAIN: ulimit -u or a cgroup's pids.max), memory, or the
// descriptor limit.
func limitHint(err error) error {
	switch {
	case errors.Is(err, syscall.EAGAIN):
		return fmt.Errorf("%w: a process limit is reached (ulimit -u, or a cgroup's pids.max): %v", ErrLimit, err)
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return fmt.Errorf("%w: the descriptor limit is reached (ulimit -n): %v", ErrLimit, err)
	case errors.Is(err, syscall.ENOMEM):
		return fmt.Errorf("%w: out of memory: %v", ErrLimit, err)
	}
	return err
}
