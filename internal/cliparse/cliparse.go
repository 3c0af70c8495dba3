// Package cliparse parses a durable-lease command line with kong so that
// every mistake becomes a usage error the caller prints as JSON, and --help
// returns instead of exiting the process.
package cliparse

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/alecthomas/kong"
)

// ErrUsage marks command-line mistakes; match it with errors.Is.
var ErrUsage = errors.New("usage error")

type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == ErrUsage }

// Usagef returns a usage error with its own message.
func Usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// exitRequest carries kong's request to exit (after --help) out of Parse.
type exitRequest struct{ code int }

// Parse parses args into grammar. When kong printed help (or another
// message) and wanted to exit, exited is true and status is what it asked
// for; otherwise a parse failure is a usage error.
func Parse(grammar any, name, description string, vars kong.Vars, args []string, stdout, stderr io.Writer) (kctx *kong.Context, exited bool, status int, err error) {
	parser, err := kong.New(grammar,
		kong.Name(name),
		kong.Description(description),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(exitRequest{code}) }),
		vars,
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, NoExpandSubcommands: true}),
	)
	if err != nil {
		return nil, false, 0, fmt.Errorf("building the parser: %w", err)
	}
	defer func() {
		if r := recover(); r != nil {
			ex, ok := r.(exitRequest)
			if !ok {
				panic(r)
			}
			kctx, exited, status, err = nil, true, ex.code, nil
		}
	}()
	kctx, err = parser.Parse(args)
	if err != nil {
		return nil, false, 0, Usagef("%v", err)
	}
	return kctx, false, 0, nil
}

// MaxMs bounds every millisecond flag (waits, polls, timeouts) at 366
// days: longer is a mistake, and far longer overflows a time.Duration
// into an instant timeout.
const MaxMs = 366 * 24 * 60 * 60 * 1000

// Ms checks a millisecond flag named name against [0, MaxMs] and returns
// it as a duration.
func Ms(name string, v int64) (time.Duration, error) {
	if v < 0 || v > MaxMs {
		return 0, Usagef("--%s must be between 0 and %d milliseconds (366 days)", name, int64(MaxMs))
	}
	return time.Duration(v) * time.Millisecond, nil
}
