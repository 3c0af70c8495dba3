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
	d := StartDaemon(t, base)
	return d.URL, d.Stop
}

// A DaemonServer is git daemon serving a directory on loopback, which a
// test may take down and bring up again on the same port (a restarted
// remote).
type DaemonServer struct {
	URL string // the URL prefix: git://127.0.0.1:PORT

	base string
	addr string
	port int

	mu      sync.Mutex
	cmd     *exec.Cmd    // nil while down
	wait    <-chan error // cmd's Wait
	stopped bool
}

// StartDaemon serves base over git:// on loopback (receive-pack enabled)
// until the test ends (or Stop).
func StartDaemon(t *testing.T, base string) *DaemonServer {
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
	d := &DaemonServer{base: base, port: port, addr: fmt.Sprintf("127.0.0.1:%d", port)}
	d.URL = "git://" + d.addr
	t.Cleanup(d.Stop)
	if err := d.Up(); err != nil {
		t.Fatal(err)
	}
	return d
}

// Up starts the daemon again after Down, on the same port, and returns
// once it accepts connections. It does nothing while the daemon is up or
// after Stop.
func (d *DaemonServer) Up() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil || d.stopped {
		return nil
	}
	cmd := exec.Command("git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
		"--base-path="+d.base, "--listen=127.0.0.1", fmt.Sprintf("--port=%d", d.port), d.base)
	// Its own process group, so that Down ends the connections it
	// forked too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("gittest: git daemon: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	d.cmd = cmd
	// Wait for it to listen, or to exit (the port taken meanwhile).
	for give := time.Now().Add(30 * time.Second); ; {
		c, err := net.Dial("tcp", d.addr)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			d.cmd = nil
			return fmt.Errorf("gittest: git daemon on %s exited before it listened: %v", d.addr, err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(give) {
			_ = procgroup.New(cmd.Process.Pid).Signal(syscall.SIGKILL)
			<-exited
			d.cmd = nil
			return fmt.Errorf("gittest: git daemon did not listen on %s", d.addr)
		}
	}
	d.wait = exited
	return nil
}

// Down kills the daemon and every connection it forked (SIGKILL to its
// process group), as a crash or a restart does: a connection to its port
// is refused until Up.
func (d *DaemonServer) Down() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return
	}
	_ = procgroup.New(d.cmd.Process.Pid).Signal(syscall.SIGKILL)
	<-d.wait
	d.cmd = nil
}

// Stop stops the daemon for good.
func (d *DaemonServer) Stop() {
	d.Down()
	d.mu.Lock()
	d.stopped = true
	d.mu.Unlock()
}
