// Package cliparse parses a durable-lease command line so that every
// mistake becomes a usage error the caller prints as JSON, and --help
// returns instead of exiting the process. The grammar is a struct with
// kong's tags. [ParseAlone] reads it by reflection over those tags
// (quick.go), with its own error messages and a help text generated
// beforehand: for the lease CLI, whose grammar it reads whole. [Parse]
// reads plain command lines that way and the rest by kong (package
// kongparse, which an executable links by importing it): for pool and
// pool-run.
package cliparse

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/internal/cli/jsonpos"
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

// Unread is implemented by a grammar whose verbs accept flags they do
// not read: common flags every verb takes for another tool's sake (pool's
// command overrides, as the Node tool's pool CLI takes them on every
// verb). The help of verb leaves out the flags UnreadFlags names, of the
// root and of the verb; they still parse.
type Unread interface {
	UnreadFlags(verb string) []string
}

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
// (see quick); help and every mistake go to the full parser, which the
// executable must link (package kongparse).
func Parse(grammar any, name, description string, vars map[string]string, args []string, stdout, stderr io.Writer) (cmd Command, exited bool, status int, err error) {
	if wantsVersion(grammar, args) {
		fmt.Fprintf(stdout, "%s %s\n", name, Version())
		return Command{}, true, 0, nil
	}
	args = helpVerb(grammar, args)
	cmd, ok := quick(grammar, args)
	if !ok {
		if full == nil {
			return Command{}, false, 0, errors.New("cliparse: this executable links no full parser (import package kongparse)")
		}
		if cmd, exited, status, err = full(grammar, name, description, vars, args, stdout, stderr); exited || err != nil {
			return cmd, exited, status, err
		}
	}
	if _, isVersion := cmd.Target.(printsVersion); isVersion {
		fmt.Fprintf(stdout, "%s %s\n", name, Version())
		return Command{}, true, 0, nil
	}
	return cmd, false, 0, nil
}

// ParseAlone is Parse without a full parser, for a grammar the quick
// parser reads whole: every mistake is reported in quick's words (see
// scan), and help is help[verb] ("" for the root), printed on stdout with
// exited true and status 0, as is --version. A grammar with a shape quick
// does not read is an error, not a usage error: a fault of the program,
// which its tests catch.
func ParseAlone(grammar any, name string, help map[string]string, args []string, stdout io.Writer) (cmd Command, exited bool, err error) {
	if wantsVersion(grammar, args) {
		io.WriteString(stdout, name+" "+Version()+"\n")
		return Command{}, true, nil
	}
	cmd, wantsHelp, err := scan(grammar, helpVerb(grammar, args))
	switch {
	case err != nil:
		return Command{}, false, err
	case wantsHelp:
		text, ok := help[cmd.Name]
		if !ok {
			return Command{}, false, errors.New("cliparse: no help text for " + strconv.Quote(name+" "+cmd.Name))
		}
		io.WriteString(stdout, text)
		return Command{}, true, nil
	}
	if _, isVersion := cmd.Target.(printsVersion); isVersion {
		io.WriteString(stdout, name+" "+Version()+"\n")
		return Command{}, true, nil
	}
	return cmd, false, nil
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

// VersionFlag is the --version flag of a grammar, for its help to list
// it: [Parse] and [ParseAlone] answer --version themselves, before
// anything else is read (see wantsVersion).
type VersionFlag struct {
	ShowVersion bool `name:"version" help:"Print the version and the commit this build was made from, and exit."`
}

// VersionCmd is the version verb of a CLI of verbs, embedded in the
// CLI's own verb type: [Parse] and [ParseAlone] print [Version] for it,
// as for --version, once the command line has parsed.
type VersionCmd struct{}

// PrintsVersion marks the version verb.
func (*VersionCmd) PrintsVersion() {}

// printsVersion is the version verb, or a verb that embeds it.
type printsVersion interface{ PrintsVersion() }

// StampedCommit is the commit a build says it was made from when the
// toolchain recorded none (GOFLAGS=-buildvcs=false, or a build outside
// a git checkout): a release build sets it with
// -ldflags "-X github.com/durable-lease/durable-lease/internal/cli/cliparse.StampedCommit=$(git rev-parse HEAD)".
var StampedCommit string

// StampedVersion is the version a release build says it is when the
// toolchain recorded none (a build without VCS information says
// "(devel)"): the release configuration (.goreleaser.yaml) sets it, as it
// sets [StampedCommit], with
// -X github.com/durable-lease/durable-lease/internal/cli/cliparse.StampedVersion=v1.2.3.
var StampedVersion string

// Version is what the build knows of itself, on one line: the module
// version (the toolchain's record, else [StampedVersion], else "(devel)"
// for a build from a clone), the VCS commit it was made
// from (the toolchain's record, else [StampedCommit], else "unknown",
// saying why), "+dirty" when the tree had changes, the commit's time, the
// Go version, and the build tags when there were any.
func Version() string {
	return versionOf(debug.ReadBuildInfo())
}

func versionOf(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return "(unknown: the binary carries no build information)"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "(devel)"
		if StampedVersion != "" {
			v = StampedVersion
		}
	}
	var rev, modified, at, tags string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		case "vcs.time":
			at = s.Value
		case "-tags":
			tags = s.Value
		}
	}
	switch {
	case rev != "":
		v += ", commit " + rev + modified
		if at != "" {
			v += " (" + at + ")"
		}
	case StampedCommit != "":
		v += ", commit " + StampedCommit + " (stamped at build time)"
	default:
		// The go command records none with -buildvcs=false, outside a
		// git checkout, and in a linked worktree (whose .git is a file).
		v += ", commit unknown (built without VCS information: with -buildvcs=false, from a linked git worktree, or not from a git checkout)"
	}
	v += ", " + bi.GoVersion
	if tags != "" {
		// A test build (tag dltestclock) says so: it honours settings a
		// release binary ignores.
		v += ", tags " + tags
	}
	return v
}

// JSON checks the value of the JSON flag called name: nil, or a usage
// error that says what is wrong and where, as a pool file's do.
func JSON(name, value string) error {
	m := jsonpos.Check([]byte(value))
	if m == nil {
		return nil
	}
	at := fmt.Sprintf("at character %d", m.Column)
	if m.Line > 1 {
		at = "at line " + m.Position.String()
	}
	return Usagef("--%s is not valid JSON: %s (%s, in %s)", name, m.Msg, at, m.Path)
}
