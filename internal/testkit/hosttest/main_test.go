package hosttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// modulePath is this module; TestMain finds its root by walking up to the
// go.mod that declares it.
const modulePath = "github.com/durable-lease/durable-lease"

var (
	// base is a directory every user can enter; binDir, under it, holds
	// the CLIs built from this checkout.
	base, binDir string
)

// nobody is the second user of the tests that need one.
const nobody = 65534

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	root, err := findModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hosttest:", err)
		return 1
	}
	if base, err = os.MkdirTemp("", "hosttest-"); err != nil {
		fmt.Fprintln(os.Stderr, "hosttest:", err)
		return 1
	}
	defer os.RemoveAll(base)
	if err := os.Chmod(base, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "hosttest:", err)
		return 1
	}
	binDir = filepath.Join(base, "bin")
	build := exec.Command("go", "build", "-o", binDir+string(filepath.Separator), "./cmd/lease", "./cmd/pool", "./cmd/pool-run")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "hosttest: go build: %v\n%s", err, out)
		return 1
	}
	return testrun.Run(m)
}

func findModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module "+modulePath+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of " + modulePath + " above the working directory")
		}
		dir = parent
	}
}

// needRoot skips t (fails it under CI=true) unless this process is root,
// which it must be to act as a second user.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	testrun.Missing(t, "needs root, to run commands as a second user (nobody)")
}

// scratch is a fresh directory under base, which every user can enter.
func scratch(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(base, "t-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

var (
	registriesMu sync.Mutex
	registries   = map[*testing.T]string{}
)

// registry is the host registry of t's commands: a directory of its own
// that, as /tmp, every user can write and whose sticky bit keeps each
// user's entries the user's (the host's /tmp is never used).
func registry(t *testing.T) string {
	t.Helper()
	registriesMu.Lock()
	defer registriesMu.Unlock()
	if d, ok := registries[t]; ok {
		return d
	}
	d := filepath.Join(scratch(t), "registry")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	registries[t] = d
	t.Cleanup(func() {
		registriesMu.Lock()
		delete(registries, t)
		registriesMu.Unlock()
	})
	return d
}

// user is who runs a command: nil for this process's user, else a uid
// and gid.
type user *syscall.Credential

var asNobody user = &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}

// result is how a command ended.
type result struct {
	stdout, stderr string
	exit           int
}

// out decodes stdout as one JSON object.
func (r result) json(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return v
}

// run runs the installed CLI name (or any program) in dir as u with a
// clean environment plus env, under the umask given, and returns how it
// ended.
func run(t *testing.T, u user, dir string, umask int, env []string, name string, args ...string) result {
	t.Helper()
	return runIn(t, u, -1, dir, umask, env, name, args...)
}

// runIn is run, the command starting inside the cgroup whose directory
// is open as cgroupFD when that is 0 or more.
func runIn(t *testing.T, u user, cgroupFD int, dir string, umask int, env []string, name string, args ...string) result {
	t.Helper()
	prog := name
	if _, err := os.Stat(filepath.Join(binDir, name)); err == nil {
		prog = filepath.Join(binDir, name)
	}
	// The umask is set by sh for the program it then becomes.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a hang is a failure, not a stuck suite
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", fmt.Sprintf("umask %03o && exec \"$@\"", umask), "sh", prog}, args...)...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + binDir + ":/usr/bin:/bin", "HOME=/nonexistent", "LC_ALL=C", "LEASE_HOST_REGISTRY=" + registry(t)}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// What a work leaves behind holding its output must not hang the
	// test: a run whose work outlives it is the failure to report.
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u}
	if cgroupFD >= 0 {
		intoCgroup(cmd.SysProcAttr, cgroupFD)
	}
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.exit = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s %v: %v", name, args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%s %v: still running after a minute, killed\nstdout: %s\nstderr: %s", name, args, r.stdout, r.stderr)
	}
	return r
}

// mustRun is run that fails t unless the command exits 0.
func mustRun(t *testing.T, u user, dir string, env []string, name string, args ...string) result {
	t.Helper()
	r := run(t, u, dir, 0o022, env, name, args...)
	if r.exit != 0 {
		t.Fatalf("%s %v: exit %d\nstdout: %s\nstderr: %s", name, args, r.exit, r.stdout, r.stderr)
	}
	return r
}

// listing is every path under dir with its mode, owner and group, for
// "nothing changed" checks.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		fmt.Fprintf(&b, "%s %v %d:%d %d\n", strings.TrimPrefix(path, dir), fi.Mode(), st.Uid, st.Gid, fi.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// waitFor polls cond for up to 10 s, failing t if it never holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
