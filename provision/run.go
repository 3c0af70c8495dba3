package provision

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
)

// DefaultKillGrace is the time [Run] gives the programs of a cancelled
// command between SIGTERM and SIGKILL when [Command.KillGrace] is not set.
// Two seconds is enough for clients such as psql or redis-cli to close their
// connections and for a server a provisioner started to shut down cleanly,
// yet short enough that a cancelled pool operation is not held up for long.
// It is also the grace period mvdan.cc/sh/v3/interp uses by default.
const DefaultKillGrace = 2 * time.Second

// Command is one provision, reset or health invocation.
type Command struct {
	// Script is the shell text from the pool file, for example
	// "sh scripts/provision.sh --slot" or "createdb x && echo ok".
	Script string
	// Dir is the absolute working directory; "" means the current directory.
	Dir string
	// Env is the complete environment as "NAME=value" strings, usually
	// os.Environ() followed by [SlotEnv]. A nil Env is an empty environment.
	Env []string
	// SlotID, unless empty, is the script's $1 and is appended as the
	// final argument of a one-line command; see [Run].
	SlotID string
	// Stdin is the command's standard input; nil reads nothing.
	Stdin io.Reader
	// Stdout receives the command's standard output; nil discards it.
	Stdout io.Writer
	// Stderr receives the command's standard error; nil discards it.
	Stderr io.Writer
	// KillGrace is the time between SIGTERM and SIGKILL to the programs of
	// a cancelled command. It also bounds how long Run waits for a program's
	// output after the program exits, when a process it left behind keeps
	// Stdout or Stderr open. Zero or negative means [DefaultKillGrace].
	KillGrace time.Duration
	// StopLeftovers also stops, when the script finishes, whatever its
	// programs left running in their process groups (SIGTERM, then
	// SIGKILL after KillGrace), as for a cancelled command. A gate phase
	// sets it: nothing of a phase may outlive it on a leased slot.
	StopLeftovers bool
}

// Run parses c.Script, appends c.SlotID and interprets the result.
//
// The slot id is the script's first positional parameter ($1), as in the
// Node tool's `sh -c '<command> "$1"' name <id>`. When the script is one
// command line (one statement, such as "sh provision.sh --slot" or
// "cd scripts && ./provision.sh --slot"), the slot id is also added to the
// parsed script as one single-quoted word, so it reaches the command as
// exactly one literal argument whatever characters it contains. It goes to
// the statement's simple command or, when that statement is a list or
// pipeline such as "a && b" or "a | b", to its right-most simple command;
// never to exit or return, whose argument is a status. A script of several
// statements ("echo x; exit 3", or several lines) gets nothing appended
// and reads the id as $1 or $POOL_SLOT_ID.
//
// Run returns nil when the script exits with status 0. A non-zero status
// gives an [*ExitError], which wraps [ErrFailed]. A script that does not
// parse, is empty, or is one statement that does not end in a simple
// command while SlotID is set gives an error wrapping [ErrSyntax]. If ctx is cancelled or its deadline
// passes before the script finishes, Run returns an error wrapping
// ctx.Err(), whatever the script's status, and by then every process the
// command started has been sent SIGTERM (with SIGCONT, so that a stopped
// one acts on it) and, if it was still running after c.KillGrace, SIGKILL
// (see procgroup.Stop). On Unix that includes grandchildren, except those
// that moved to a process group or session of their own, and Run may wait
// up to c.KillGrace for them to exit, and briefly after the SIGKILL for
// them to be gone.
func Run(ctx context.Context, c Command) error {
	file, err := parseScript(c.Script, c.SlotID)
	if err != nil {
		return err
	}
	grace := c.KillGrace
	if grace <= 0 {
		grace = DefaultKillGrace
	}

	stdout, stderr := c.Stdout, c.Stderr
	if stdout == nil || stderr == nil {
		// Hand programs a real file rather than a pipe to drain, so nothing
		// waits on output that is thrown away anyway.
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("provision: %w", err)
		}
		defer null.Close()
		if stdout == nil {
			stdout = null
		}
		if stderr == nil {
			stderr = null
		}
	}

	started := &processes{grace: grace}
	opts := []interp.RunnerOption{
		interp.Env(expand.ListEnviron(c.Env...)),
		interp.Dir(c.Dir),
		interp.StdIO(c.Stdin, stdout, stderr),
		interp.ExecHandlers(started.middleware),
	}
	if c.SlotID != "" {
		// "--" ends the options, so an id such as "-e" is a parameter.
		opts = append(opts, interp.Params("--", c.SlotID))
	}
	runner, err := interp.New(opts...)
	if err != nil {
		return fmt.Errorf("provision: %w", err)
	}
	err = runner.Run(ctx, file)
	if ctxErr := ctx.Err(); ctxErr != nil {
		// Even a script that ends with status 0, say by waiting for
		// background jobs the cancellation killed, did not do its job.
		// Stop everything it started, including what earlier commands
		// left running.
		started.stop()
		return fmt.Errorf("provision: command stopped: %w", ctxErr)
	}
	if c.StopLeftovers {
		started.stop()
	}
	return result(err)
}

// result turns the error of an interpreter run that was not cancelled into
// the error Run returns.
func result(err error) error {
	if err == nil {
		return nil
	}
	if status, ok := errors.AsType[interp.ExitStatus](err); ok {
		return &ExitError{Status: int(status)}
	}
	return fmt.Errorf("provision: %w", err)
}

var (
	// ErrFailed is wrapped by the error [Run] returns when a command finishes
	// with a non-zero exit status. The status itself is available through
	// [ExitError].
	ErrFailed = errors.New("provision: command failed")

	// ErrSyntax is wrapped by the error [Run] returns when a command's script
	// does not parse, is empty, or does not end in a simple command that the
	// slot id can be appended to.
	ErrSyntax = errors.New("provision: invalid command")
)

// ExitError reports the non-zero exit status of a command. It unwraps to
// [ErrFailed], so callers can test for either:
//
//	var ee *provision.ExitError
//	if errors.As(err, &ee) { log.Print(ee.Status) }
//	if errors.Is(err, provision.ErrFailed) { ... }
type ExitError struct {
	// Status is the shell exit status, between 1 and 255. A program killed by
	// a signal has status 128 plus the signal number, as in POSIX shells.
	Status int
}

// Error returns a message of the form "provision: command failed: exit status N".
func (e *ExitError) Error() string {
	return ErrFailed.Error() + ": exit status " + strconv.Itoa(e.Status)
}

// Unwrap returns [ErrFailed].
func (e *ExitError) Unwrap() error { return ErrFailed }
