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

// Exit statuses of a run, besides the command's own and those of a failed
// acquisition (1 refused or timed out, 2 usage, 3 internal).
const (
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

// Sentinel errors; match them with errors.Is.
var (
	// ErrInvalid reports bad options; nothing was acquired.
	ErrInvalid = errors.New("runner: invalid options")
	// ErrStart reports a command that could not be started.
	ErrStart = errors.New("runner: cannot start the command")
	// ErrInterrupted reports a run ended by a signal.
	ErrInterrupted = errors.New("runner: interrupted")
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
	// Log, when set, gets the progress and summary lines (default Stderr).
	Log io.Writer
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

// Result is how a run ended.
type Result struct {
	// Exit is the status to exit with.
	Exit int
	// Code is a stable word for the outcome: "ok", "failed" (the work's
	// own non-zero status), "lease_lost", "timeout" (a phase), "interrupted",
	// "not_found" / "not_executable" / "reset_failed" / "health_failed",
	// or the refusal code of a failed acquisition ("held", "saturated", ...).
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
}

// Held is what a run held.
type Held struct {
	Kind  string `json:"kind"`
	Slot  string `json:"slot,omitempty"`
	Pool  string `json:"pool,omitempty"`
	Owner string `json:"owner"`
	Token string `json:"-"`
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
