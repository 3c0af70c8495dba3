package testrun

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	if os.Getenv("TESTRUN_CHILD") == "parallel" {
		Main(m, Parallel(7))
	}
	Main(m)
}

// TestParallel: Parallel sets -test.parallel's default; the command line
// still wins.
func TestParallel(t *testing.T) {
	if os.Getenv("TESTRUN_CHILD") != "" {
		t.Skip("the child's own run")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "7"},
		{[]string{"-test.parallel=3"}, "3"},
	} {
		cmd := exec.Command(os.Args[0], append([]string{"-test.run", "^TestChildParallel$", "-test.v"}, tc.args...)...)
		cmd.Env = append(os.Environ(), "TESTRUN_CHILD=parallel")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !strings.Contains(string(out), "test.parallel="+tc.want+"\n") {
			t.Errorf("with %q, want test.parallel=%s:\n%s", tc.args, tc.want, out)
		}
	}
}

// TestParallelRefusesNoTests: an option refuses what it cannot use, and
// Run then runs no test and returns 2.
func TestParallelRefusesNoTests(t *testing.T) {
	ran := false
	if got := Run(runFunc(func() int { ran = true; return 0 }), Parallel(0)); got != 2 || ran {
		t.Fatalf("Run with Parallel(0) = %d (tests ran: %v), want 2 and no test run", got, ran)
	}
}

type runFunc func() int

func (f runFunc) Run() int { return f() }

// TestChildParallel is the child's run of TestParallel.
func TestChildParallel(t *testing.T) {
	if os.Getenv("TESTRUN_CHILD") != "parallel" {
		t.Skip("run by TestParallel")
	}
	fmt.Printf("test.parallel=%s\n", flag.Lookup("test.parallel").Value)
}

// TestMissingFailsUnderCI: with CI=true a missing program fails the test.
func TestMissingFailsUnderCI(t *testing.T) {
	if os.Getenv("TESTRUN_CHILD") != "" {
		t.Skip("the child's own run")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TESTRUN_CHILD=skips", "CI=true")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child passed under CI=true:\n%s", out)
	}
	if !strings.Contains(string(out), "no frobnicator here: apt-get install frob (CI=true: a failure, not a skip)") {
		t.Fatalf("no failure for the missing program:\n%s", out)
	}
}

// TestChild is the child's run of TestMissingFailsUnderCI.
func TestChild(t *testing.T) {
	if os.Getenv("TESTRUN_CHILD") == "" {
		t.Skip("run by TestMissingFailsUnderCI")
	}
	t.Run("a", func(t *testing.T) { Missing(t, "no frobnicator here: apt-get install frob") })
	t.Run("b", func(t *testing.T) { Skip(t, "set FROB=long to run it") })
	t.Run("c", func(t *testing.T) { Missing(t, "no frobnicator here: apt-get install frob") })
	t.Run("d", func(t *testing.T) {})
}

// TestRaceEnv: the pause at exit is turned off, and GORACE's other
// settings are kept.
func TestRaceEnv(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "GORACE=atexit_sleep_ms=0"},
		{"halt_on_error=1", "GORACE=halt_on_error=1 atexit_sleep_ms=0"},
		{"atexit_sleep_ms=50", "GORACE=atexit_sleep_ms=50"},
	} {
		t.Setenv("GORACE", tc.in)
		if got := RaceEnv(); got != tc.want {
			t.Errorf("GORACE=%q: RaceEnv() = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestCommandsBuiltOncePerRun: the packages of one go test run share one
// build of the commands, in the run's directory; the next run removes
// that directory once the go command that made it has exited.
func TestCommandsBuiltOncePerRun(t *testing.T) {
	tmp := t.TempDir()
	builds := func() string {
		out := goTestFixtures(t, tmp, "-v", "./testdata/commands/...")
		dirs := map[string]bool{}
		for _, l := range strings.Split(string(out), "\n") {
			if _, dir, ok := strings.Cut(l, "commands in "); ok {
				dirs[dir] = true
			}
		}
		if len(dirs) != 1 {
			t.Fatalf("the two packages used %d builds, want one:\n%s", len(dirs), out)
		}
		for dir := range dirs {
			if !strings.HasPrefix(dir, filepath.Join(tmp, "durable-lease-testrun-")) {
				t.Errorf("the build %s is not in the run's directory", dir)
			}
			return dir
		}
		return ""
	}
	first := builds()
	second := builds()
	if first == second {
		t.Fatalf("two runs shared the build %s", first)
	}
	if _, err := os.Stat(filepath.Dir(first)); !os.IsNotExist(err) {
		t.Errorf("the first run's directory is left behind after the second: %v", err)
	}
}

// goTestFixtures runs go test -count=1 args (fixture packages under
// testdata) with TMPDIR tmp, and returns the output.
func goTestFixtures(t *testing.T, tmp string, args ...string) []byte {
	t.Helper()
	if os.Getenv("TESTRUN_CHILD") != "" {
		t.Skip("the child's own run")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the run directory is Linux's")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		Missing(t, "the go command is not on PATH")
	}
	cmd := exec.Command(goTool, append([]string{"test", "-count=1"}, args...)...)
	cmd.Env = append(os.Environ(), "CI=", "TMPDIR="+tmp, "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go test: %v\n%s", err, out)
	}
	return out
}
