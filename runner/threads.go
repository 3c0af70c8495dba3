package runner

import (
	"runtime"
	"sync"
)

// warmThreads is how many threads of its own the Go runtime of pool-run
// (and of its guardian) may need at once while the work runs: one per P,
// and one for each goroutine blocked in a system call (the socket to the
// other, a signal, a terminal's copies, a wait), with room to spare.
const warmThreadsN = 12

// warmThreads makes the runtime start warmThreadsN threads now and keep
// them idle. The runtime reuses an idle thread before it makes a new
// one, and cannot carry on when it needs one the kernel refuses: a work
// that forks up to the user's process limit (ulimit -u, a container's
// pids limit) would otherwise crash the very process that must end it.
// Each goroutine below holds a thread of its own until all are running,
// then lets it go back to the runtime.
func warmThreads() {
	var ready, release sync.WaitGroup
	ready.Add(warmThreadsN)
	release.Add(1)
	var done sync.WaitGroup
	for range warmThreadsN {
		done.Go(func() {
			runtime.LockOSThread()
			ready.Done()
			release.Wait()
			runtime.UnlockOSThread()
		})
	}
	ready.Wait()
	release.Done()
	done.Wait()
}
