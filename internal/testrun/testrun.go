package testrun

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// M is what [Run] runs: a *testing.M, or what testscript.Main hands on.
type M interface{ Run() int }

// Main runs m's tests and exits with their status: os.Exit(Run(m, opts...)).
func Main(m *testing.M, opts ...Option) { os.Exit(Run(m, opts...)) }

// Option changes how [Run] runs a package's tests.
type Option func()

// Parallel makes n the default of -test.parallel (how many parallel tests
// run at once; go test's default is GOMAXPROCS) for a package whose tests
// spend their time waiting (on child processes, timers, a lease's expiry)
// rather than computing: there a 2-core machine can carry more of them at
// once than it has cores. A -parallel on the command line still wins.
func Parallel(n int) Option {
	return func() {
		if !flag.Parsed() {
			flag.Parse()
		}
		set := false
		flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
		if !set {
			flag.Set("test.parallel", strconv.Itoa(n))
		}
	}
}

// Run runs m's tests and returns their exit status. Before, it puts
// [RaceEnv] into this process's environment, so every child process a
// test starts inherits it, and applies opts; after, it prints the
// package's skips, if any, as one line (see [Summary]).
func Run(m M, opts ...Option) int {
	k, v, _ := strings.Cut(RaceEnv(), "=")
	os.Setenv(k, v)
	if os.Getenv(hostRegistryEnv) == "" {
		// The pools the tests open are claimed in a host registry of
		// their own, never in the host's (/tmp): a directory of this
		// process's, which every child inherits.
		if d, err := os.MkdirTemp("", "host-registry-"); err == nil {
			os.Setenv(hostRegistryEnv, d)
			defer os.RemoveAll(d)
		}
	}
	for _, o := range opts {
		o()
	}
	defer scratchCgroup()()
	code := m.Run()
	if line := Summary(); line != "" {
		report(line, code == 0)
	}
	removeOwnCommands()
	return code
}

// hostRegistryEnv is dirpool.RegistryEnv (this package imports nothing
// of the module's).
const hostRegistryEnv = "LEASE_HOST_REGISTRY"

// HostRegistryEnv is the LEASE_HOST_REGISTRY that [Run] set for the tests'
// pools, for a test that builds a child's environment from scratch or
// drops the LEASE_ variables of the developer's.
func HostRegistryEnv() string { return hostRegistryEnv + "=" + os.Getenv(hostRegistryEnv) }

// RaceEnv is GORACE as this process has it, with atexit_sleep_ms=0 added
// unless the variable already sets it: a binary built with -race (a test
// binary that re-runs itself as a CLI, a helper process) otherwise sleeps
// one second at every exit, so that goroutines still running can report a
// race. Races found before the exit are reported all the same, and the
// exit status still says so (66). A test that builds a child's
// environment from scratch (testscript does) adds this to it.
func RaceEnv() string {
	v := os.Getenv("GORACE")
	if !strings.Contains(v, "atexit_sleep_ms") {
		v = strings.TrimSpace(v + " atexit_sleep_ms=0")
	}
	return "GORACE=" + v
}

var (
	mu      sync.Mutex
	skipped = map[string][]string{} // reason -> test names
)

// Skip records why t skips, for the package's closing line, and skips it.
// It is for skips that are a choice of the run: an opt-in profile (say
// which variable runs it) or a mode such as -short.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	mu.Lock()
	skipped[why] = append(skipped[why], t.Name())
	mu.Unlock()
	t.Skip(why)
}

// Missing reports a program or service t needs and this machine lacks
// (say what, and how to get it): under CI=true a failure, since .ci/run
// installs and starts everything and a skip there would leave the case
// untested; elsewhere a [Skip].
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: a failure, not a skip)", why)
	}
	Skip(t, "%s", why)
}

// maxNames is how many skipped tests of one reason a closing line names;
// go test -v lists them all.
const maxNames = 4

// Summary is the package's closing line: how many tests skipped, their
// names grouped by reason, or "" when none did.
func Summary() string {
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, names := range skipped {
		n += len(names)
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("testrun: %s: skipped %s: %s", packageDir(), plural(n, "test"), byReason(skipped))
}

// byReason lists skipped tests grouped by reason, reasons in order:
// "TestA, TestB (why); TestC (why not)".
func byReason(skips map[string][]string) string {
	reasons := make([]string, 0, len(skips))
	for why := range skips {
		reasons = append(reasons, why)
	}
	sort.Strings(reasons)
	parts := make([]string, len(reasons))
	for i, why := range reasons {
		names := skips[why]
		if len(names) > maxNames {
			names = append(names[:maxNames:maxNames], fmt.Sprintf("%d more", len(names)-maxNames))
		}
		parts[i] = fmt.Sprintf("%s (%s)", strings.Join(names, ", "), why)
	}
	return strings.Join(parts, "; ")
}

// plural is "1 test" or "n tests".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// packageDir is the working directory (go test runs a package's tests in
// its directory) relative to the module root, or as it is.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "?"
	}
	root, err := moduleRoot()
	if err != nil {
		return wd
	}
	rel, err := filepath.Rel(root, wd)
	if err != nil {
		return wd
	}
	return "./" + filepath.ToSlash(rel)
}

// report prints line on stdout, where go test -v, go test -json, a run in
// the package's directory and a failing package's output show it. In
// package list mode (go test ./...) the go command discards the output of
// a package that passes and prints only its "ok" line; then the skips go
// to the run's spool instead, for the one line that ends the run (see
// spool_linux.go). Where there is no spool, the line goes to the go
// command's own standard output, beside the package's "ok" line, when
// that is a terminal or a pipe.
func report(line string, passed bool) {
	fmt.Println(line)
	if !passed || verbose() {
		return
	}
	mu.Lock()
	skips := make(map[string][]string, len(skipped))
	for why, names := range skipped {
		skips[why] = append([]string(nil), names...)
	}
	mu.Unlock()
	if spool(packageDir(), skips) == nil {
		return
	}
	if out, err := goStdout(); err == nil {
		fmt.Fprintln(out, line)
		out.Close()
	}
}

// verbose reports whether the go command shows this binary's output
// anyway (-v, or -json, which runs it with -test.v=test2json).
func verbose() bool {
	f := flag.Lookup("test.v")
	return f != nil && f.Value.String() != "false"
}

// goStdout opens the standard output of the go command that runs this
// binary, when that is not this binary's own standard output already (a
// run in the package's directory streams it there). It fails where there
// is no /proc, or the parent is not the go command.
func goStdout() (*os.File, error) {
	ppid := os.Getppid()
	if err := goParent(ppid); err != nil {
		return nil, err
	}
	var theirs syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/fd/1", ppid), &theirs); err != nil {
		return nil, err
	}
	// A file opened anew has an offset of its own: the go command's next
	// write would land on the line. A terminal or a pipe has none.
	if theirs.Mode&syscall.S_IFMT == syscall.S_IFREG {
		return nil, errors.New("the go command writes to a file")
	}
	return os.OpenFile(fmt.Sprintf("/proc/%d/fd/1", ppid), os.O_WRONLY, 0)
}

// goParent checks that the process ppid is the go command and that its
// standard output is not this binary's (the go command streams a single
// package's output: the binary's own line is then the run's).
func goParent(ppid int) error {
	parent := fmt.Sprintf("/proc/%d", ppid)
	exe, err := os.Readlink(parent + "/exe")
	if err != nil {
		return err
	}
	if base := filepath.Base(exe); base != "go" && !strings.HasPrefix(base, "go1") {
		return errors.New("not run by the go command")
	}
	var mine, theirs syscall.Stat_t
	if err := syscall.Fstat(1, &mine); err != nil {
		return err
	}
	if err := syscall.Stat(parent+"/fd/1", &theirs); err != nil {
		return err
	}
	if mine.Dev == theirs.Dev && mine.Ino == theirs.Ino {
		return errors.New("the go command's output is this binary's")
	}
	return nil
}

// Wrap returns an M whose Run is [Run] of m: for a TestMain that hands
// its M to another runner, as testscript.Main(testrun.Wrap(m), cmds).
func Wrap(m M, opts ...Option) M { return wrapped{m, opts} }

type wrapped struct {
	m    M
	opts []Option
}

func (w wrapped) Run() int { return Run(w.m, w.opts...) }
