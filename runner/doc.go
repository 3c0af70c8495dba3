// Package runner runs work while holding a lease: a slot of a pool or a
// single baton lease. It is the engine of the pool-run command.
//
// [Command] acquires (waiting in the pool's queue, or for the baton),
// starts the command with the grant's environment in a process group of
// its own (on a pseudo-terminal of its own when stdin and stdout are a
// terminal), keeps the lease alive with a [lease.Hold], and releases it on
// every exit path. When the lease is lost the whole process group gets
// SIGTERM and, after the kill grace, SIGKILL, and the result is [ExitLost].
// Signals the caller passes in are forwarded to the group. [Gate] does the
// same for the phases of a gate file, resetting the slot between them.
//
// Nothing of the command's process group is left running when a Run
// returns: processes it left behind are stopped before the lease is given
// back, so no one uses the resource after its successor got it (except
// processes that moved to a process group or session of their own).
package runner
