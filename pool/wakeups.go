package pool

// wakeups are the channels of a waiter's watcher. slots receives a value
// soon after a slot lease file changes, queue soon after queue.json does,
// so a waiter re-checks within milliseconds of a release instead of at its
// next poll. They are separate so that a waiter that cannot be granted
// whatever the slots do (too far back in the queue) listens to the queue
// only: a release then wakes the waiters that could take the slot, not
// every waiter (a herd).
//
// The store directory, where slot leases live, is busy: every lease
// operation of every process makes several events there. A waiter that
// cannot be granted stops watching it (listen(false)), so those events do
// not wake it at all; it watches it again, before its next attempt, when
// the queue moves it forward.
type wakeups struct {
	slots, queue <-chan struct{}
	// listen starts or stops watching the store directory; it returns once
	// the watch is in place, so an attempt made after it misses nothing.
	listen func(on bool)
}
