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

// TestChildParallel is the child's run of TestParallel.
func TestChildParallel(t *testing.T) {
	if os.Getenv("TESTRUN_CHILD") != "parallel" {
		t.Skip("run by TestParallel")
	}
	fmt.Printf("test.parallel=%s\n", flag.Lookup("test.parallel").Value)
}

// TestSummary: skips are counted and named by reason in one line, and
// stay out of the line for tests that did not skip.
func TestSummary(t *testing.T) {
	if os.Getenv("TESTRUN_CHILD") != "" {
		t.Skip("the child's own run")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TESTRUN_CHILD=skips", "CI=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := "testrun: ./internal/testrun: skipped 3 tests: TestChild/a, TestChild/c (no frobnicator here: apt-get install frob); TestChild/b (set FROB=long to run it)"
	if !strings.Contains(string(out), want+"\n") {
		t.Fatalf("the child's output lacks\n%s\n:\n%s", want, out)
	}
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
	if strings.Contains(string(out), "skipped 3") {
		t.Fatalf("the failures were counted as skips:\n%s", out)
	}
}

// TestChild is the child's run of TestSummary and TestMissingFailsUnderCI.
func TestChild(t *testing.T) {
	if os.Getenv("TESTRUN_CHILD") == "" {
		t.Skip("run by TestSummary")
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

// TestOneLineEndsTheRun: go test over several packages that skip ends
// with one line for them all, after every "ok" line, in a pipe; the
// packages' own lines stay out of it, and the spool is gone.
func TestOneLineEndsTheRun(t *testing.T) {
	out, tmp := goTestFixtures(t, "./testdata/skips/...")
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	want := "testrun: skipped 4 tests in 2 packages: " +
		"./internal/testrun/testdata/skips/a: TestMissinga (no frobnicator here); TestSkipsa (the fixture's reason in a); " +
		"./internal/testrun/testdata/skips/b: TestMissingb (no frobnicator here); TestSkipsb (the fixture's reason in b)"
	if lines[len(lines)-1] != want {
		t.Fatalf("the run's last line is not\n%s\n:\n%s", want, out)
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "ok  \t") {
			t.Errorf("a line other than an ok line before the last: %q", l)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "durable-lease-testrun-*")); len(left) > 0 {
		t.Errorf("the spool is left behind: %q", left)
	}
}

// TestCommandsBuiltOncePerRun: the packages of one go test run share one
// build of the commands, which is gone once the run has ended.
func TestCommandsBuiltOncePerRun(t *testing.T) {
	out, tmp := goTestFixtures(t, "-v", "./testdata/commands/...")
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
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the build %s is left behind: %v", dir, err)
		}
	}
}

// goTestFixtures runs go test -count=1 args (fixture packages under
// testdata) with a TMPDIR of its own, returned with the output, read
// through a pipe (which the reporter holds until it has written).
func goTestFixtures(t *testing.T, args ...string) (out []byte, tmp string) {
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
	tmp = t.TempDir()
	cmd := exec.Command(goTool, append([]string{"test", "-count=1"}, args...)...)
	cmd.Env = append(os.Environ(), "CI=", "TMPDIR="+tmp, "GOFLAGS=")
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go test: %v\n%s", err, out)
	}
	return out, tmp
}
