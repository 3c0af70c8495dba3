// Package gittest serves git repositories for tests, on loopback: a bare
// repository for git+file://, git daemon for git+git://, git http-backend
// for git+http:// ([HTTP]). A machine without git skips the tests that
// need it, with a message (CI never does: see internal/testkit/testrun).
package gittest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/procgroup"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
)

// NeedGit skips t when git is not installed.
func NeedGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testrun.Missing(t, "git is not installed (apt-get install git)")
	}
}

// BareRepo makes an empty bare repository and returns its path.
func BareRepo(t *testing.T) string {
	t.Helper()
	NeedGit(t)
	dir := filepath.Join(t.TempDir(), "leases.git")
	if out, err := exec.Command("git", "init", "--quiet", "--bare", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	return dir
}

// Daemon serves base over git:// on loopback (receive-pack enabled) and
// returns the URL prefix and a function that stops the daemon early (it
// is stopped at the end of the test in any case).
func Daemon(t *testing.T, base string) (prefix string, stop func()) {
	t.Helper()
	NeedGit(t)
	exe, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(strings.TrimSpace(string(exe)), "git-daemon")); err != nil {
		testrun.Missing(t, "git-daemon is not installed (apt-get install git-daemon-run, or a git with git-daemon)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
		"--base-path="+base, "--listen=127.0.0.1", fmt.Sprintf("--port=%d", port), base)
	// Its own process group, so that stop ends the connections it
	// forked too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = procgroup.New(cmd.Process.Pid).Signal(syscall.SIGKILL)
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if i == 200 {
			t.Fatalf("git daemon did not listen on %s", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "git://" + addr, stop
}
