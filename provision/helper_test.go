package provision

import (
	"encoding/json"
	"fmt"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the external program that scripts under test
// run, so the tests need no sh, sleep or printf on the host. A script calls
// it as "$HELPER <mode> ...", with helperEnv set in its environment.
const helperEnv = "PROVISION_TEST_HELPER"

// helperLife bounds how long a helper that waits lives, so a failing test
// cannot leave processes behind for long.
const helperLife = time.Minute

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" && len(os.Args) > 1 {
		os.Exit(helperMain(os.Args[1], os.Args[2:]))
	}
	testrun.Main(m)
}

// helperMain runs the helper program mode with args and returns its exit
// status.
func helperMain(mode string, args []string) int {
	switch mode {
	case "args": // print the arguments as a JSON array
		if err := json.NewEncoder(os.Stdout).Encode(args); err != nil {
			return 1
		}
	case "exit": // exit with status args[0]
		n, _ := strconv.Atoi(args[0])
		return n
	case "pwd":
		dir, err := os.Getwd()
		if err != nil {
			return 1
		}
		fmt.Println(dir)
	case "getenv":
		fmt.Println(os.Getenv(args[0]))
	case "stderr":
		fmt.Fprintln(os.Stderr, args[0])
	case "sleep":
		time.Sleep(helperLife)
	case "stubborn": // ignore SIGTERM, then sleep
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(helperLife)
	case "spawn": // spawn PIDFILE CHILDMODE wait|exit; PIDFILE gets "PID CHILDPID"
		child := exec.Command(os.Args[0], args[1])
		child.Stdout, child.Stderr = os.Stdout, os.Stderr
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pids := strconv.Itoa(os.Getpid()) + " " + strconv.Itoa(child.Process.Pid)
		if err := writeFileAtomic(args[0], pids); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if args[2] == "wait" {
			time.Sleep(helperLife)
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 2
	}
	return 0
}

// writeFileAtomic writes data to name so that readers see either no file or
// all of it.
func writeFileAtomic(name, data string) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// helperEnviron returns an environment in which scripts can run the helper
// as "$HELPER", plus extra.
func helperEnviron(t testing.TB, extra ...string) []string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// GORACE: race-enabled helpers otherwise sleep a second before exiting.
	env := []string{helperEnv + "=1", "HELPER=" + self, "PATH=" + emptyDir(t), "GORACE=atexit_sleep_ms=0"}
	return append(env, extra...)
}

// emptyDir returns a new empty directory, used as PATH to show that a
// script needs no programs from the host.
func emptyDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "empty")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
