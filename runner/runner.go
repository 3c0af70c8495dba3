package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// Exit statuses of a run, besides the command's own. The first three are
// those every durable-lease CLI exits with (internal/cli/outcome), so that a
// run's status means what a lease or pool command's does.
const (
	// ExitRefused is a refusal: nothing was acquired (see [AcquireError]),
	// or a gate's reset or health check failed on the slot.
	ExitRefused = 1
	// ExitUsage is bad options or a bad gate; nothing was acquired.
	ExitUsage = 2
	// ExitInternal is an unexpected failure: the guardian could not start
	// or died, or the store failed during a reset.
	ExitInternal = 3
	// ExitLost is EX_TEMPFAIL from sysexits.h: the lease was lost while the
	// work ran, so the work was stopped and may be retried.
	ExitLost = 75
	// ExitTimeout is what timeout(1) reports: a gate phase ran out of time.
	ExitTimeout = 124
	// ExitNotExecutable and ExitNotFound are the shell's statuses for a
	// command that cannot be started.
	ExitNotExecutable = 126
	ExitNotFound      = 127
	// ExitSignalBase plus a signal number is the status of a command
	// killed by that signal, and of a run ended by it.
	ExitSignalBase = 128
)

// DefaultKillGrace is the time between SIGTERM and SIGKILL to a command's
// process group: long enough for a test runner to stop its browsers and
// servers and flush its report, short enough that a lost slot is quiet
// again well before its successor starts using it.
const DefaultKillGrace = 10 * time.Second

// DefaultBatonTTL is a baton lease's TTL in minutes when none is given.
// The holder heartbeats every TTL/8, so this is only how long a crashed
// pool-run blocks the baton.
const DefaultBatonTTL = 15

// Sentinel errors; match them with errors.Is. Which one a [Result]'s Err
// matches follows from its Code (see [Result]).
var (
	// ErrInvalid reports bad options; nothing was acquired.
	ErrInvalid = errors.New("runner: invalid options")
	// ErrStart reports a command that could not be started.
	ErrStart = errors.New("runner: cannot start the command")
	// ErrGuardian reports a run whose own processes could not be started
	// or set up (the guardian, the process that starts the work: a process
	// or descriptor limit reached, the run's cgroup unusable). It is an
	// internal failure (exit 3), never the command's 126.
	ErrGuardian = errors.New("runner: cannot start the run's guardian")
	// ErrInterrupted reports a run ended by a signal.
	ErrInterrupted = errors.New("runner: interrupted")
	// ErrNotAcquired reports that the pool or the store refused the lease
	// or failed; nothing ran. The error is an [*AcquireError].
	ErrNotAcquired = errors.New("runner: not acquired")
	// ErrLost reports that the lease was lost while the work ran, or was
	// found lost at the release. It is [lease.ErrLost] itself, so a
	// [lease.Hold]'s loss matches it.
	ErrLost = lease.ErrLost
	// ErrPhaseTimeout reports a gate phase that ran out of its timeout.
	ErrPhaseTimeout = errors.New("runner: phase timed out")
)

// AcquireError reports an acquisition that the pool or the store refused
// or could not complete: nothing was held and nothing ran. Err is their
// error, read with errors.Is and errors.As ([pool.ErrSaturated],
// [pool.ErrTimeout], a [*lease.HeldError], [lease.ErrUnavailable], ...);
// runner does not tell the refusals apart, its caller does (pool-run names
// each one with the code and status of the pool CLI). It matches
// [ErrNotAcquired], and its text is Err's.
type AcquireError struct{ Err error }

func (e *AcquireError) Error() string        { return e.Err.Error() }
func (e *AcquireError) Unwrap() error        { return e.Err }
func (e *AcquireError) Is(target error) bool { return target == ErrNotAcquired }

// Codes of a [Result]: a stable word for each way a run ends.
const (
	CodeOK            = "ok"
	CodeFailed        = "failed" // the work's own non-zero status
	CodeUsage         = "usage"
	CodeNotAcquired   = "not_acquired"
	CodeInterrupted   = "interrupted"
	CodeLost          = "lease_lost"
	CodeTimeout       = "timeout" // a gate phase
	CodeNotFound      = "not_found"
	CodeNotExecutable = "not_executable"
	CodeInternal      = "internal"
	// A gate's reset before a phase failed: the slot's reset command, or
	// its health check after the reset (pool.GrantResetFailed and
	// pool.GrantHealthFailed).
	CodeResetFailed  = PhaseResetFailed
	CodeHealthFailed = "health_failed"
)

// Options say what to hold and how to run under it.
type Options struct {
	// Store is the lease store. Required.
	Store *lease.Store
	// Pool, when set, makes the run take a slot of it; otherwise it holds
	// the single lease Kind (a baton).
	Pool *pool.Pool
	Kind string
	// Owner holds the lease. Required.
	Owner string
	// TTLMinutes is the baton's TTL (0: DefaultBatonTTL). A slot's TTL is
	// the pool's, set when the pool is opened.
	TTLMinutes float64
	// Payload is kept with a baton lease (nil for none).
	Payload json.RawMessage
	// Heartbeat is the interval between heartbeats (0: TTL/8). It must be
	// shorter than the TTL.
	Heartbeat time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL (0: DefaultKillGrace).
	KillGrace time.Duration
	// NoWait refuses at once when nothing is free; Wait (if positive)
	// bounds the time spent waiting.
	NoWait bool
	Wait   time.Duration
	// Stdin, Stdout and Stderr are the run's streams; nil means the
	// process's own. The command gets them as they are (a file is passed
	// on, not copied), or a pseudo-terminal when Stdin and Stdout are both
	// the terminal this process is in the foreground of.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// NoPty keeps the command on the streams even on a terminal.
	NoPty bool
	// Env is the base environment (nil: os.Environ()); the grant's
	// variables and POOL_RUN_* are added to it.
	Env []string
	// Dir is the command's working directory ("" for the current one).
	Dir string
	// Signals, when set, delivers the signals to forward. The first one
	// received also decides the status, 128 + its number.
	Signals <-chan os.Signal
	// Log, when set, gets the lines that tell what the run is doing
	// (default Stderr): a wait for the baton, a loss, a phase starting.
	// How the run ended is the [Result]'s, for the caller to tell.
	Log io.Writer
	// Queue, when set, is shown the run's place in the pool's queue while
	// it waits for a slot.
	Queue QueueReporter
	// Containment says how the work is held: [ContainAuto] (""), a cgroup
	// of the run's own where one can be made, else the guardian's process
	// tree; [ContainCgroup] requires the cgroup; [ContainTree] never makes
	// one. The cgroup holds the pool's provision, reset and health
	// commands too, and the lease's record names it, so that whoever takes
	// the lease from this run ends what is left in it first.
	Containment string
	// CgroupParent is the cgroup v2 directory to make the run's cgroup in
	// ("": pool-run's own cgroup, where this user may write it).
	CgroupParent string
	// JobControl makes SIGTSTP (Ctrl-Z) stop the work and then this
	// process, as a shell job; when continued, the lease is renewed before
	// the work runs again. A command-line program sets it; a library
	// caller that does not own the process's signals leaves it off.
	JobControl bool
}

func (o *Options) check() error {
	switch {
	case o.Store == nil:
		return fmt.Errorf("%w: no store", ErrInvalid)
	case o.Pool == nil && o.Kind == "":
		return fmt.Errorf("%w: neither a pool nor a kind to hold", ErrInvalid)
	case o.Pool != nil && o.Kind != "":
		return fmt.Errorf("%w: a pool and a kind exclude each other", ErrInvalid)
	case o.Kind != "" && !lease.ValidKind(o.Kind):
		return fmt.Errorf("%w: kind %q must match %s", ErrInvalid, o.Kind, lease.KindPattern)
	case o.Heartbeat < 0, o.KillGrace < 0, o.Wait < 0:
		return fmt.Errorf("%w: negative duration", ErrInvalid)
	case o.NoWait && o.Wait > 0:
		return fmt.Errorf("%w: no-wait and a wait bound exclude each other", ErrInvalid)
	}
	if o.TTLMinutes == 0 {
		o.TTLMinutes = DefaultBatonTTL
	}
	if o.Pool != nil {
		o.TTLMinutes = o.Pool.TTLMinutes()
	}
	if !lease.ValidTTL(o.TTLMinutes) {
		return fmt.Errorf("%w: ttl %v minutes must be %s", ErrInvalid, o.TTLMinutes, lease.TTLRange)
	}
	ttl := time.Duration(o.TTLMinutes * float64(time.Minute))
	if o.Heartbeat != 0 && o.Heartbeat >= ttl {
		return fmt.Errorf("%w: heartbeat %s must be shorter than the ttl (%s), or the lease lapses between beats", ErrInvalid, o.Heartbeat, ttl)
	}
	if o.KillGrace == 0 {
		o.KillGrace = DefaultKillGrace
	}
	if err := o.checkFloor(ttl); err != nil {
		return err
	}
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Log == nil {
		o.Log = o.Stderr
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
	return nil
}

// Result is how a run ended. Code says which way, Exit is the status to
// exit with, and Err explains a run that did not end with the work's own
// status. Err's contract, for each Code:
//
//	Code            Exit       Err
//	ok              0          nil
//	failed          the work's nil (a gate's failed phase has its own Err)
//	usage           2          matches ErrInvalid (bad options, no command, no phases),
//	                           or is the gate's error (its env does not expand)
//	not_acquired    1          an *AcquireError: the pool's or the store's error
//	interrupted     128+n      matches ErrInterrupted; Signal is signal n
//	lease_lost      75         matches ErrLost
//	timeout         124        matches ErrPhaseTimeout
//	not_found       127        matches ErrStart
//	not_executable  126        matches ErrStart
//	reset_failed,   1          the pool's *pool.SlotError (its State is the code)
//	health_failed
//	reset_failed    3          the store's error during the reset
//	internal        3          the guardian could not start (matches ErrGuardian) or died,
//	                           a resource limit left no room (ErrLimit), no cgroup (ErrContainment)
//
// A work whose own status is 75 or 124 is "failed", never "lease_lost" or
// "timeout". For usage, not_acquired and not_found nothing was held and
// nothing ran; an interrupted run whose Held is empty was interrupted
// while it waited or provisioned.
type Result struct {
	// Exit is the status to exit with.
	Exit int
	// Code is a stable word for the outcome, one of the Code constants.
	Code string
	// Err explains a run that did not end with the work's own status.
	Err error
	// Held describes what was held ("" if nothing was acquired).
	Held Held
	// HeldFor is how long it was held.
	HeldFor time.Duration
	// Signal is the signal that ended the run, if any.
	Signal os.Signal
	// Phases are a gate's phases, in order, including those not run.
	Phases []PhaseResult
	// Containment is how the work was held, for a run that acquired.
	Containment *Containment
}

// QueueReporter is shown a waiter's place in a pool's queue: Show at
// each change (it is the wait's [pool.AcquireRequest.OnWait]), then Done
// once when the wait is over, whichever way, before anything else is
// written to [Options.Log]. pool-run's is a line on stderr, updated in
// place on a terminal.
type QueueReporter interface {
	Show(pool.Position)
	Done()
}

// Held is what a run held.
type Held struct {
	Kind  string
	Slot  string // a pool slot's id; "" for a baton
	Pool  string // the pool's name; "" for a baton
	Owner string
	Token string
}

// String is "slot 1 of pool p" or "lease k".
func (h Held) String() string {
	if h.Slot != "" {
		return fmt.Sprintf("slot %s of pool %s", h.Slot, h.Pool)
	}
	return "lease " + h.Kind
}

// signalStatus is the status for a run ended by sig.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return ExitSignalBase + int(s)
	}
	return ExitSignalBase + int(syscall.SIGTERM)
}
