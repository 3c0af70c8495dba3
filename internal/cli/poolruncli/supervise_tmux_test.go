//go:build linux

package poolruncli

import (
	"fmt"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// shell is an interactive bash (bash --norc -i, prompt "$ ") in a tmux
// server of its own, in the test's directory: a person's terminal, with
// job control, for Ctrl-Z, fg and stty.
type shell struct {
	t    *testing.T
	bin  string
	sock string
	pane int // the shell's pid
}

var tmuxServers atomic.Int64

// needed skips a test that needs prog where it is missing, unless CI is
// set, where that is a failure: the cases would silently go untested.
func needed(t *testing.T, prog, why string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err == nil {
		return p
	}
	testrun.Missing(t, "%s is not installed: %s", prog, why)
	return ""
}

// shell starts the test's tmux server and its shell; t.Cleanup kills it.
func (s *sup) shell() *shell {
	t := s.t
	t.Helper()
	why := "Ctrl-Z, fg and stty tostop are typed at an interactive shell in tmux"
	sh := &shell{t: t, bin: needed(t, "tmux", why), sock: fmt.Sprintf("durable-lease-sup-%d-%d", os.Getpid(), tmuxServers.Add(1))}
	needed(t, "bash", why)
	sh.tmux("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "30", "-c", s.dir,
		"exec env PS1='$ ' HISTFILE=/dev/null bash --norc --noprofile -i")
	t.Cleanup(func() {
		socket, _ := sh.command("display-message", "-p", "#{socket_path}").Output()
		_ = sh.command("kill-server").Run()
		if p := strings.TrimSpace(string(socket)); p != "" {
			_ = os.Remove(p) // the server leaves it behind
		}
	})
	sh.pane, _ = strconv.Atoi(strings.TrimSpace(sh.tmux("display-message", "-p", "#{pane_pid}")))
	sh.waitScreen("$ ", 10*time.Second)
	return sh
}

func (sh *shell) command(args ...string) *exec.Cmd {
	c := exec.Command(sh.bin, append([]string{"-L", sh.sock}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TMUX=") {
			c.Env = append(c.Env, kv)
		}
	}
	return c
}

func (sh *shell) tmux(args ...string) string {
	sh.t.Helper()
	out, err := sh.command(args...).CombinedOutput()
	if err != nil {
		sh.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// line types text and Enter.
func (sh *shell) line(text string) {
	sh.t.Helper()
	sh.tmux("send-keys", "-l", "--", text)
	sh.tmux("send-keys", "Enter")
}

// key types a key such as C-z.
func (sh *shell) key(k string) {
	sh.t.Helper()
	sh.tmux("send-keys", k)
}

// screen is the pane's text, its history included.
func (sh *shell) screen() string {
	out, err := sh.command("capture-pane", "-p", "-J", "-S", "-").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(capture-pane: %v: %s)", err, out)
	}
	return strings.TrimRight(string(out), "\n")
}

func (sh *shell) waitScreen(text string, within time.Duration) {
	sh.t.Helper()
	if !waitFor(within, func() bool { return strings.Contains(sh.screen(), text) }) {
		sh.t.Fatalf("%q never appeared on the terminal; it shows:\n%s", text, sh.screen())
	}
}

// exitStatus waits for exit.txt, which the shell line writes after
// pool-run: its status and the time it exited (a little later, at most).
func (sh *shell) exitStatus(s *sup, within time.Duration) (int, time.Time) {
	sh.t.Helper()
	var code int
	var ns int64
	ok := waitFor(within, func() bool {
		b, err := os.ReadFile(s.path("exit.txt"))
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		_, err = fmt.Sscan(string(b), &code, &ns)
		return err == nil
	})
	if !ok {
		sh.t.Fatalf("pool-run did not exit within %s; the work's processes:%s\nscreen:\n%s", within, s.states(), sh.screen())
	}
	return code, time.Unix(0, ns)
}

// sttyUnchanged compares stty -g before and after the run, as the shell
// line wrote them.
func (sh *shell) sttyUnchanged(s *sup) {
	sh.t.Helper()
	read := func(name string) string {
		var b []byte
		waitFor(5*time.Second, func() bool {
			var err error
			b, err = os.ReadFile(s.path(name))
			return err == nil && strings.HasSuffix(string(b), "\n")
		})
		return strings.TrimSpace(string(b))
	}
	before, after := read("stty.before"), read("stty.after")
	if before == "" || before != after {
		sh.t.Errorf("the terminal's modes changed: stty -g was %q, is %q", before, after)
	}
}
