// Package cliparse parses a durable-lease command line so that every
// mistake becomes a usage error the caller prints as JSON, and --help
// returns instead of exiting the process. Plain command lines are read by
// reflection over the grammar's kong tags (quick.go); the rest by kong
// (package kongparse), which an executable links by importing it.
package cliparse

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime/debug"
	"strings"
	"time"
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

// ErrNeedsFullParser reports a command line that the quick parser does
// not read (help, a mistake, an unusual form) in an executable linked
// without the full one (package kongparse): the lease executable, which
// hands such command lines to one that has it.
var ErrNeedsFullParser = errors.New("this command line needs the full parser")

// FullParser parses a command line by the whole grammar, with help and
// every error message; package kongparse registers kong's.
type FullParser func(grammar any, name, description string, vars map[string]string, args []string, stdout, stderr io.Writer) (cmd Command, exited bool, status int, err error)

var full FullParser

// RegisterFull makes f the full parser of this executable.
func RegisterFull(f FullParser) { full = f }

// Parse parses args into grammar and returns the verb they selected.
// When the parser printed help (or another message) and wanted to exit,
// exited is true and status is what it asked for; otherwise a parse
// failure is a usage error. A plain command line is read the quick way
// (see quick); help and every mistake go to the full parser, or fail with
// ErrNeedsFullParser in an executable that links none.
func Parse(grammar any, name, description string, vars map[string]string, args []string, stdout, stderr io.Writer) (cmd Command, exited bool, status int, err error) {
	if wantsVersion(grammar, args) {
		fmt.Fprintf(stdout, "%s %s\n", name, Version())
		return Command{}, true, 0, nil
	}
	args = helpVerb(grammar, args)
	if cmd, ok := quick(grammar, args); ok {
		return cmd, false, 0, nil
	}
	if full == nil {
		return Command{}, false, 0, ErrNeedsFullParser
	}
	return full(grammar, name, description, vars, args, stdout, stderr)
}

// Quick is the quick parse alone: the verb, and whether it read args.
func Quick(grammar any, args []string) (Command, bool) { return quick(grammar, args) }

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

// wantsVersion reports a --version among the CLI's own flags: before any
// "--", and in a CLI that runs the command given as its arguments (a
// grammar whose root ends in a passthrough argument, as pool-run's does)
// also before that command's first word, from which on every word is the
// command's: "pool-run --kind k git --version" runs git. A word is the
// command's first when it does not start with "-" and is not the value of
// the flag before it; a flag the grammar does not know is taken to have no
// value (the parse then reports it).
func wantsVersion(grammar any, args []string) bool {
	at := -1
	for i, a := range args {
		if a == "--" {
			return false
		}
		if a == "--version" {
			at = i
			break
		}
	}
	if at < 0 {
		return false // the common case: no grammar to read
	}
	var root node
	rv := reflect.ValueOf(grammar)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct || !root.read(rv.Elem().Type(), nil) || root.arg == nil || len(root.verbs) > 0 {
		return true
	}
	for i := 0; i < at; i++ {
		a := args[i]
		switch {
		case !strings.HasPrefix(a, "-"):
			return false // the command's first word
		case strings.HasPrefix(a, "--") && !strings.Contains(a, "="):
			k := flagIndex(root.flags, a[2:])
			if k >= 0 && root.flags[k].typ != boolType && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++ // the flag's value
			}
		}
	}
	return true
}

// helpVerb turns "help [VERB...]" into "[VERB...] --help" for CLIs made of
// verbs, as users of such CLIs expect; a CLI that runs a command given as
// its arguments (pool-run) keeps "help" as that command.
func helpVerb(grammar any, args []string) []string {
	if _, runsCommands := grammar.(interface{ RunsCommands() }); runsCommands || len(args) == 0 || args[0] != "help" {
		return args
	}
	return append(append([]string{}, args[1:]...), "--help")
}

// Version is the module version and VCS revision the binary was built
// from, as the Go toolchain recorded them, the Go version, and the build
// tags when there were any.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified, tags string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		case "-tags":
			tags = s.Value
		}
	}
	if rev != "" {
		v += " (" + rev[:min(len(rev), 12)] + modified + ")"
	}
	v += " " + bi.GoVersion
	if tags != "" {
		// A test build (tag dltestclock) says so: it honours settings a
		// release binary ignores.
		v += " tags=" + tags
	}
	return v
}
