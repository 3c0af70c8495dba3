// Package cliparse parses a durable-lease command line with kong so that
// every mistake becomes a usage error the caller prints as JSON, and --help
// returns instead of exiting the process.
package cliparse

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
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

// Parse parses args into grammar and returns the verb they selected.
// When kong printed help (or another message) and wanted to exit, exited
// is true and status is what it asked for; otherwise a parse failure is a
// usage error. A plain command line is read without kong (see quick);
// help and every mistake go to kong, which builds the whole grammar.
func Parse(grammar any, name, description string, vars kong.Vars, args []string, stdout, stderr io.Writer) (cmd Command, exited bool, status int, err error) {
	if wantsVersion(args) {
		fmt.Fprintf(stdout, "%s %s\n", name, Version())
		return Command{}, true, 0, nil
	}
	args = helpVerb(grammar, args)
	if cmd, ok := quick(grammar, args); ok {
		return cmd, false, 0, nil
	}
	return parseWithKong(grammar, name, description, vars, args, stdout, stderr)
}

// parseWithKong is Parse by kong's model of the whole grammar.
func parseWithKong(grammar any, name, description string, vars kong.Vars, args []string, stdout, stderr io.Writer) (cmd Command, exited bool, status int, err error) {
	parser, err := kong.New(grammar,
		kong.Name(name),
		kong.Description(description),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(exitRequest{code}) }),
		vars,
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, NoExpandSubcommands: true}),
	)
	if err != nil {
		return Command{}, false, 0, fmt.Errorf("building the parser: %w", err)
	}
	defer func() {
		if r := recover(); r != nil {
			ex, ok := r.(exitRequest)
			if !ok {
				panic(r)
			}
			cmd, exited, status, err = Command{}, true, ex.code, nil
		}
	}()
	kctx, err := parser.Parse(args)
	if err != nil {
		return Command{}, false, 0, Usagef("%v", err)
	}
	if sel := kctx.Selected(); sel != nil {
		cmd = Command{Name: sel.Name, Target: sel.Target.Addr().Interface()}
	}
	return cmd, false, 0, nil
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

// wantsVersion reports a --version before any "--".
func wantsVersion(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--version" {
			return true
		}
	}
	return false
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
