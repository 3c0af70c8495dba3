// Package runner runs work while holding a lease: a slot of a pool or a
// single baton lease. It is the engine of the pool-run command.
//
// # The invariant
//
// No process of the work runs after the lease is lost, and none runs while
// nobody is able to heartbeat for it.
//
// # How it is kept
//
// [Command] and [Gate] acquire (waiting in the pool's queue, or for the
// baton), keep the lease alive with a [lease.Hold], and start the work
// through a guardian: this same executable started again (the package's
// init function serves that role in any program that links it), in a
// process group of its own, so that the terminal's signals and a kill of
// the caller's process group do not reach it. The guardian is the parent
// of the work and, on Linux, its child subreaper, so every descendant of
// the work stays in its tree whatever process group or session it moves
// to, and "the guardian has no process left below it" means "nothing of
// the work runs".
//
// After every confirmed heartbeat the caller tells the guardian until when
// the lease is safely held (its confirmed expiry less the backend's
// margin, on CLOCK_BOOTTIME, which runs on through a suspend). The
// guardian acts on its own when:
//
//   - that time draws near without a renewal: SIGTERM to every process of
//     the work a grace before it, SIGKILL a margin before it, and never
//     while a renewal may still land late through a fault the store
//     rides out (see budget);
//   - the caller dies (its end of the socket closes): SIGTERM, SIGKILL
//     after the kill grace or at that same deadline; then the terminal's
//     saved modes are restored and the lease released;
//   - the caller is stopped (SIGSTOP, seen within a quarter second): the
//     work is stopped too, and continued only after the caller, running
//     again, has renewed the lease; past the deadline it is killed,
//     never continued.
//
// The caller itself kills the work at once (no grace) on a loss: the
// lease may be someone else's already. A signal from [Options.Signals] is
// passed to every process of the work, SIGKILL follows after the kill
// grace, and a second signal kills at once. With [Options.JobControl],
// SIGTSTP (Ctrl-Z) stops the work and then the caller; when continued,
// the caller renews before the work runs again, and a lease lost meanwhile
// ends the work unrun with [ExitLost].
//
// When the command (or a gate phase) exits, whatever it left running is
// ended the same way before the next phase, the reset or the release.
// Each of the caller's streams that is a terminal reaches the work through
// a pseudo-terminal of its own, which the work leads; other streams are
// passed as they are, and without a terminal the work runs in a session
// with no controlling terminal: nothing of the work can be stopped by
// SIGTTOU or SIGTTIN on a terminal while the lease is kept.
//
// What remains possible: killing the caller and the guardian at once
// (SIGKILL to both); killing the guardian alone, after which the caller
// kills the work's process group but cannot find descendants that left it;
// on systems without a subreaper (other than Linux), processes that leave
// the work's process group. The pool's provision, reset and health
// commands run in the caller, as they do for any pool client.
package runner
