package testrun

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// M is what [Run] runs: a *testing.M, or what testscript.Main hands on.
type M interface{ Run() int }

// Main runs m's tests and exits with their status: os.Exit(Run(m, opts...)).
func Main(m *testing.M, opts ...Option) { os.Exit(Run(m, opts...)) }

// Option changes how [Run] runs a package's tests. It has the module's
// one option shape, [lease.Option]'s: a function over an unexported
// options struct that refuses input it cannot use.
//
// [lease.Option]: https://pkg.go.dev/github.com/durable-lease/durable-lease/lease#Option
type Option func(*options) error

type options struct {
	parallel int // the default of -test.parallel; 0 leaves go test's
}

// Parallel makes n the default of -test.parallel (how many parallel tests
// run at once; go test's default is GOMAXPROCS) for a package whose tests
// spend their time waiting (on child processes, timers, a lease's expiry)
// rather than computing: there a 2-core machine can carry more of them at
// once than it has cores. A -parallel on the command line still wins. n
// must be at least 1.
func Parallel(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("testrun: Parallel(%d): want at least 1", n)
		}
		o.parallel = n
		return nil
	}
}

// apply sets what o asks of the flags, before the tests parse them again.
func (o options) apply() {
	if o.parallel == 0 {
		return
	}
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", strconv.Itoa(o.parallel))
	}
}

// Run runs m's tests and returns their exit status. Before, it puts
// [RaceEnv] into this process's environment, so every child process a
// test starts inherits it, makes the binary's scratch cgroup (see
// scratchCgroup) and applies opts. An option that refuses its input
// runs no test: Run says why on stderr and returns 2.
func Run(m M, opts ...Option) int {
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
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
	o.apply()
	defer scratchCgroup()()
	code := m.Run()
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

// Skip skips t, saying why. It is for skips that are a choice of the
// run: an opt-in profile (say which variable runs it) or a mode such as
// -short. gotestsum (as .ci/run runs the suite) lists every skip with
// its reason; so does go test -v.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Skipf(format, args...)
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
	t.Skip(why)
}

// Wrap returns an M whose Run is [Run] of m: for a TestMain that hands
// its M to another runner, as testscript.Main(testrun.Wrap(m), cmds).
func Wrap(m M, opts ...Option) M { return wrapped{m, opts} }

type wrapped struct {
	m    M
	opts []Option
}

func (w wrapped) Run() int { return Run(w.m, w.opts...) }
