package pooltop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// These tests run `pool top` in a real terminal: a tmux pane of a private
// tmux server, read with capture-pane and driven with send-keys, while
// other processes change the pool.

// requireTmux returns tmux's path, or skips the test without it; on CI
// (CI=true) a missing tmux fails the test instead (.ci/install.sh
// installs it).
func requireTmux(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("tmux")
	if err != nil {
		testrun.Missing(t, "tmux is not installed: the tests of pool top under a real terminal need it (apt-get install tmux; .ci/install.sh installs it)")
	}
	return path
}

// clis returns the directory of the commands (pool, durable-lease-top
// and durable-lease-etcd among them), built as the README installs them,
// once for the whole go test run (see testrun.Commands).
func clis(t *testing.T) string {
	t.Helper()
	return testrun.Commands(t, "")
}

func TestMain(m *testing.M) { testrun.Main(m) }

// cleanEnv is this process's environment without the variables that
// would change what the CLIs do.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LEASE_") || strings.HasPrefix(kv, "POOL_") || strings.HasPrefix(kv, "TMUX") ||
			strings.HasPrefix(kv, "NO_COLOR=") || strings.HasPrefix(kv, "DL_TEST_") {
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, testrun.HostRegistryEnv()), extra...)
}

var sockets atomic.Int64

// pane is a shell in a tmux pane of a server of its own.
type pane struct {
	t          *testing.T
	tmux, sock string
}

// newPane starts a private tmux server with one pane of w × h running sh
// with env, killed when the test ends.
func newPane(t *testing.T, w, h int, env []string) *pane {
	t.Helper()
	p := &pane{t: t, tmux: requireTmux(t), sock: fmt.Sprintf("pooltop-test-%d-%d", os.Getpid(), sockets.Add(1))}
	cmd := exec.Command(p.tmux, "-L", p.sock, "-f", "/dev/null", "new-session", "-d", "-s", "main",
		"-x", fmt.Sprint(w), "-y", fmt.Sprint(h), "sh")
	cmd.Env = append(env, "ENV=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(p.tmux, "-L", p.sock, "kill-server").Run() })
	// The window keeps its size whatever clients attach (none do).
	p.run("set-option", "-g", "window-size", "manual")
	return p
}

func (p *pane) run(args ...string) string {
	p.t.Helper()
	out, err := exec.Command(p.tmux, append([]string{"-L", p.sock}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// typeLine types a command line into the shell and presses Enter.
func (p *pane) typeLine(line string) {
	p.t.Helper()
	p.run("send-keys", "-t", "main", "-l", line)
	p.run("send-keys", "-t", "main", "Enter")
}

func (p *pane) keys(keys ...string) {
	p.t.Helper()
	p.run(append([]string{"send-keys", "-t", "main"}, keys...)...)
}

func (p *pane) screen() string {
	p.t.Helper()
	return p.run("capture-pane", "-p", "-t", "main")
}

// waitFor polls the screen until ok accepts it, for at most within; it
// fails the test with the last screen.
func (p *pane) waitFor(what string, within time.Duration, ok func(screen string) bool) string {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := p.screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("after %s the screen does not show %s:\n%s", within, what, s)
		}
		time.Sleep(40 * time.Millisecond)
	}
}

func (p *pane) waitForText(within time.Duration, texts ...string) string {
	p.t.Helper()
	return p.waitFor(fmt.Sprintf("%q", texts), within, func(s string) bool {
		for _, want := range texts {
			if !strings.Contains(s, want) {
				return false
			}
		}
		return true
	})
}

// fixture is a pool file and a directory store.
type fixture struct {
	t                *testing.T
	bin, file, store string
	env              []string
}

func newFixture(t *testing.T, slots int) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{t: t, bin: clis(t), file: filepath.Join(dir, "pool.json"), store: filepath.Join(dir, "store")}
	var s []string
	for i := 1; i <= slots; i++ {
		s = append(s, fmt.Sprintf(`{"id": %d, "ports": {"api": %d, "web": %d}, "db": "acme_test_%d"}`, i, 3000+100*(i-1), 3001+100*(i-1), i))
	}
	pf := fmt.Sprintf(`{"name": "acme", "ttlMinutes": 10, "waiterStaleMs": 600000, "slots": [%s]}`, strings.Join(s, ", "))
	if err := os.WriteFile(f.file, []byte(pf), 0o644); err != nil {
		t.Fatal(err)
	}
	f.env = cleanEnv("NO_COLOR=1") // the screen is read as text
	return f
}

// pool runs the pool command from another process and returns its JSON.
func (f *fixture) pool(args ...string) map[string]any {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(f.bin, "pool"), append([]string{"--pool", f.file, "--store", f.store}, args...)...)
	cmd.Env = f.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var out map[string]any
	if jerr := json.Unmarshal(stdout.Bytes(), &out); jerr != nil {
		f.t.Fatalf("pool %s: %v: %s %s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return out
}

// topLine is the shell line that runs the view and then says how it
// exited.
func (f *fixture) topLine(extra ...string) string {
	return fmt.Sprintf("%s --pool %s --store %s top %s; echo EXITED=$?", filepath.Join(f.bin, "pool"), f.file, f.store, strings.Join(extra, " "))
}

// The view follows the pool as other processes change it, redrawn by the
// change notifications alone (the fallback re-read is an hour away), and
// q leaves it with the terminal restored.
func TestTopFollowsThePool(t *testing.T) {
	requireTmux(t)
	f := newFixture(t, 5)
	p := newPane(t, 80, 24, f.env)
	p.typeLine(f.topLine("--interval", "1h"))
	p.waitForText(10*time.Second, "pool acme · 0/5 held · 5 free · 0 waiting", "QUEUE empty", "EVENTS none yet", "q leaves")
	if cmd := strings.TrimSpace(p.run("display-message", "-p", "-t", "main", "#{pane_current_command}")); cmd != "durable-lease-top" {
		t.Errorf("the pane runs %q, want durable-lease-top (pool hands top to it)", cmd)
	}

	start := time.Now()
	g := f.pool("acquire", "--owner", "ci-main")
	token, _ := g["token"].(string)
	s := p.waitForText(5*time.Second, "1/5 held", "held        ci-main", "granted")
	t.Logf("the grant was on screen %s after the acquire started", time.Since(start).Round(time.Millisecond))
	fp := strings.TrimPrefix(lease.TokenFingerprint(token), "sha256:")
	if token == "" || strings.Contains(s, token) || !strings.Contains(s, fp[:8]) {
		t.Errorf("the screen should show the token's fingerprint %s, never the token %s:\n%s", fp[:8], token, s)
	}

	// A busy pool: a slot quarantined by an operator, a release, a failed
	// provision, a lease reaped after it lapsed, a queue, and a holder that
	// went silent (its lease lapses while the view watches: nothing is
	// written then, yet the view shows it at once).
	f.pool("quarantine", "--slot", "5", "--owner", "ops-alice", "--reason", "disk full on the db host")
	p.waitForText(5*time.Second, "quarantined reason: disk full on the db host")
	r := f.pool("acquire", "--owner", "agent-1")
	f.pool("release", "--slot", fmt.Sprint(r["slot"]), "--owner", "agent-1", "--token", r["token"].(string))
	f.pool("acquire", "--owner", "agent-5", "--provision-cmd", "echo no database; false")
	f.pool("acquire", "--owner", "e2e-nightly", "--ttl", "30")
	f.pool("acquire", "--owner", "agent-7", "--ttl", "0.01")
	time.Sleep(1200 * time.Millisecond) // agent-7's lease lapses; the next acquire reaps it
	f.pool("acquire", "--owner", "agent-3", "--ttl", "15")
	f.pool("acquire", "--owner", "agent-2", "--ttl", "0.03")
	p.waitForText(5*time.Second, "4/5 held", "held        agent-2")
	// Waiters with no process behind them (plumbing): they stay queued.
	f.pool("enqueue", "--owner", "agent-9", "--session", "review-bot")
	f.pool("enqueue", "--owner", "ci-nightly", "--mode", "async")
	s = p.waitForText(5*time.Second, "3/5 held", "1 unknown", "1 quarantined", "2 waiting", "#2 ci-nightly", "slot_reaped", "released", "agent-3")
	t.Logf("a busy pool at 80×24:\n%s", s)
	if out := os.Getenv("POOLTOP_CAPTURE"); out != "" {
		if err := os.WriteFile(out, []byte(s), 0o644); err != nil {
			t.Error(err)
		}
	}
	for _, want := range []string{"unknown     agent-2", "expired", "agent-9 (review-bot)", "e2e-nightly", "grant_reset_failed", "provision failed"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q on the busy screen", want)
		}
	}

	// Too narrow: one line says so; wide enough again: the view is back.
	p.run("resize-window", "-t", "main", "-x", "50", "-y", "24")
	p.waitForText(5*time.Second, "needs 60×10 (is 50×24)")
	p.run("resize-window", "-t", "main", "-x", "120", "-y", "30")
	p.waitForText(5*time.Second, "3/5 held", "ATTRIBUTES", fp, "ports=api:3000,web:3001")

	p.keys("q")
	s = p.waitForText(5*time.Second, "EXITED=0")
	if strings.Contains(s, "SLOT STATE") || strings.Contains(s, "q leaves") {
		t.Errorf("the view is still on screen after q:\n%s", s)
	}
	if !strings.Contains(s, "; echo EXITED=$?") {
		t.Errorf("the shell's screen, with the command line typed, is not back:\n%s", s)
	}
}

// Esc and Ctrl-C leave too, with status 0 and the terminal restored.
func TestTopLeaves(t *testing.T) {
	for _, key := range []string{"Escape", "C-c"} {
		t.Run(key, func(t *testing.T) {
			requireTmux(t)
			f := newFixture(t, 1)
			p := newPane(t, 80, 24, f.env)
			p.typeLine(f.topLine())
			p.waitForText(10*time.Second, "pool acme · 0/1 held")
			p.keys(key)
			s := p.waitForText(5*time.Second, "EXITED=0")
			if strings.Contains(s, "q leaves") {
				t.Errorf("the view is still on screen:\n%s", s)
			}
			// The terminal is back in cooked mode: the shell echoes.
			p.typeLine("echo cooked-$((40+2))")
			p.waitForText(5*time.Second, "cooked-42")
		})
	}
}

// A pool without durable-lease-top beside it or on PATH says how to
// install it (exit 2), in the usual JSON.
func TestTopWithoutTheHelper(t *testing.T) {
	requireTmux(t)
	f := newFixture(t, 1)
	lone := t.TempDir()
	data, err := os.ReadFile(filepath.Join(f.bin, "pool"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lone, "pool"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range f.env {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	p := newPane(t, 200, 24, append(env, "PATH=/usr/bin:/bin"))
	p.typeLine(fmt.Sprintf("%s --pool %s top; echo EXITED=$?", filepath.Join(lone, "pool"), f.file))
	s := p.waitForText(10*time.Second, "EXITED=2", `"code":"usage"`, "durable-lease-top, which is not installed at", "go install ./cmd/...")
	if strings.Contains(s, "q leaves") {
		t.Errorf("a view without its helper:\n%s", s)
	}
}

// On etcd, pool hands `pool top` to durable-lease-top, which opens the
// store itself, and so does durable-lease-etcd: no loop between them.
func TestTopOnEtcd(t *testing.T) {
	if testing.Short() {
		testrun.Skip(t, "-short (starts etcd)")
	}
	requireTmux(t)
	url := startEtcd(t)
	f := newFixture(t, 2)
	f.store = url
	for _, entry := range []string{"pool", "durable-lease-etcd pool"} {
		t.Run(strings.Fields(entry)[0], func(t *testing.T) {
			owner := "via-" + strings.Fields(entry)[0]
			p := newPane(t, 80, 24, f.env)
			words := strings.Fields(entry)
			line := filepath.Join(f.bin, words[0]) + " " + strings.Join(words[1:], " ")
			p.typeLine(fmt.Sprintf("%s --pool %s --store %s top --interval 1h; echo EXITED=$?", line, f.file, f.store))
			p.waitForText(20*time.Second, "pool acme ·", "store "+f.store)
			if cmd := strings.TrimSpace(p.run("display-message", "-p", "-t", "main", "#{pane_current_command}")); cmd != "durable-lease-top" {
				t.Errorf("the pane runs %q, want durable-lease-top", cmd)
			}
			g := f.pool("acquire", "--owner", owner)
			p.waitForText(10*time.Second, "held        "+owner)
			f.pool("release", "--slot", fmt.Sprint(g["slot"]), "--owner", owner, "--token", g["token"].(string))
			p.waitForText(10*time.Second, "released")
			p.keys("q")
			p.waitForText(10*time.Second, "EXITED=0")
		})
	}
}
