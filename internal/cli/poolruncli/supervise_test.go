//go:build linux

package poolruncli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/procfs"
	"github.com/durable-lease/durable-lease/lease"
)

// The supervision tests: pool-run as a real process (this test binary,
// re-run as pool-run, and again as its guardian), its work a real shell
// script, on real terminals (creack/pty, and tmux where a person types
// Ctrl-Z and fg at an interactive bash).
//
// Every work is work.sh (supervisionWork below): each of its processes
// appends its pid to ./pids, and while it runs it appends a wall-clock
// stamp (date +%s%N) to ./ticks every 100 ms. The tests then assert what
// the lease promises its successor, in wall-clock terms:
//
//   - no stamp later than the moment a successor could hold the lease
//     (pool-run's exit, or a successor's Acquire returning);
//   - every recorded pid gone (zombies count as gone) at that moment, and
//     no process at all left with the test's directory as its working
//     directory (the guardian included) soon after;
//   - a TCP port the work held bindable at once;
//   - the lease free, or the successor's untouched;
//   - the terminal's modes (stty -g) as they were.
//
// Modes: plain (stdin not a terminal: pipes and files from exec.Cmd, or
// `true | pool-run` at the tmux shell), pty (stdin and stdout a terminal:
// a creack/pty terminal pool-run leads as a session, or the tmux shell's
// terminal), gate (the work is a gate file's phase). Each case runs in each
// mode; the Ctrl-Z and tostop cases need a real job-control shell, so they
// run all three modes at bash in tmux.

const (
	supTTL       = "0.05"          // minutes: a 3 s lease, heartbeated every 375 ms
	supTTLDur    = 3 * time.Second // the same
	supKillGrace = "300ms"
	// stopWithin is how soon after pool-run is stopped (SIGSTOP, Ctrl-Z)
	// the work must stop ticking: Ctrl-Z is told to the guardian at once,
	// a SIGSTOP it sees within its idle tick (a quarter second), a tick in
	// flight may land, and the machine is busy with parallel tests. A
	// work that is not stopped ticks on until the guardian's deadline,
	// some 2.5 s later.
	stopWithin = 700 * time.Millisecond
	// tickSlack is the clock's slack for the last stamp.
	tickSlack = 5 * time.Millisecond
	// settle is how long to look for stamps after the cut: a survivor
	// ticks every 100 ms.
	settle = 400 * time.Millisecond
)

var supModes = []string{"plain", "pty", "gate"}

// supervisionWork is work.sh. "run OPTIONS" is the work proper: it
// starts what OPTIONS ask for, waits until each has recorded its pid,
// writes ./ready, then ticks until ./stop appears (or three times with
// leave), prints say=, and exits with exit=.
const supervisionWork = `# work.sh: the work of the supervision tests (supervise_test.go).
tick() { date +%s%N >> ticks; sleep 0.1; }
case $1 in
run)
	shift
	echo $$ >> pids
	want=1 code=0 leave= say=
	for a in "$@"; do
		case $a in
		trap-int) trap '' INT ;;
		trap-term) trap '' TERM ;;
		setsid) setsid sh "$0" ticker & want=$((want+1)) ;;
		bg) sh "$0" ticker & want=$((want+1)) ;;
		port=*) setsid '@PY@' hold_port.py "${a#port=}" </dev/null >/dev/null 2>&1 & want=$((want+1)) ;;
		escape=*) setsid sh -c 'echo $$ > "$1"/cgroup.procs && exec sh "$2" ticker' sh "${a#escape=}" "$0" & want=$((want+1)) ;;
		leave) leave=1 ;;
		say=*) say=${a#say=} ;;
		exit=*) code=${a#exit=} ;;
		esac
	done
	sh "$0" waitpids $want
	echo up > ready
	if [ -n "$leave" ]; then
		tick; tick; tick
	else
		while [ ! -e stop ]; do tick; done
	fi
	[ -z "$say" ] || echo "$say"
	exit $code ;;
ticker)
	# Something left behind: it ignores SIGTERM (and, as with nohup,
	# SIGHUP) and ticks forever.
	trap '' HUP TERM
	echo $$ >> pids
	while :; do tick; done ;;
waitpids)
	until [ -e pids ] && [ "$(wc -l < pids)" -ge "$2" ]; do sleep 0.01; done ;;
alive)
	for p in $(cat pids); do
		if [ -r /proc/$p/stat ] && ! grep -q ') Z ' /proc/$p/stat; then echo $p; fi
	done ;;
esac
`

// holdPort is a detached server: it holds a TCP port and sleeps.
const holdPort = `import os, socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
with open("pids", "a") as f:
    f.write("%d\n" % os.getpid())
time.sleep(60)
`

// nextPhase is a gate's second phase: when it starts, nothing of the
// first may run any more. It lasts long enough for a survivor of the
// first to tick in it.
const nextPhase = "date +%s%N > next.start\nsh work.sh alive > alive.next\nsleep 0.5"

// sup is one supervision test: a rig with work.sh, and a ./pool-run
// wrapper (this test binary as pool-run on the rig's store) for the tmux
// shell.
type sup struct {
	*rig
	t *testing.T
}

// newSup makes the test's rig and runs the test in parallel with the
// others: each has its own directory, store, terminal and tmux server.
func newSup(t *testing.T) *sup {
	t.Helper()
	t.Parallel()
	needed(t, "setsid", "the work detaches processes with setsid(1)")
	s := &sup{rig: newRig(t), t: t}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\n%s=1 LEASE_STORE=%s LEASE_OWNER= LEASE_POOL_FILE= LEASE_OWNER_PATTERN= GORACE=%s exec %s \"$@\"\n",
		asCLI, shq(s.store), shq(strings.TrimPrefix(goraceQuick, "GORACE=")), shq(exe))
	s.write("pool-run", wrapper, 0o755)
	s.write("work.sh", strings.ReplaceAll(supervisionWork, "@PY@", pythonPath()), 0o644)
	s.write("hold_port.py", holdPort, 0o644)
	// Cleanups run last in, first out: this one before the removal of
	// the directory (registered by newRig), after pool-run's and tmux's.
	// Nothing of a failed run outlives the test.
	t.Cleanup(s.killStrays)
	return s
}

// goraceQuick spares pool-run and its guardian, under -race, the race
// runtime's second of sleep at exit, which would stretch every exit the
// cases time. (A gate phase's interpreter gets a clean environment and
// keeps it: a gate's phases take a second longer each under -race.)
var goraceQuick = "GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (s *sup) write(name, content string, mode os.FileMode) {
	s.t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, name), []byte(content), mode); err != nil {
		s.t.Fatal(err)
	}
}

func (s *sup) path(name string) string { return filepath.Join(s.dir, name) }

func (s *sup) touch(name string) { s.write(name, "", 0o644) }

// pythonPath is python3's real executable (not a version manager's shim,
// which costs a shell or two per start), or python3 when it cannot tell.
var pythonPath = sync.OnceValue(func() string {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if p := strings.TrimSpace(string(out)); err == nil && p != "" {
		return p
	}
	return "python3"
})

// flags are pool-run's flags for a case: a 3 s TTL and a short kill grace
// unless overridden (name, value pairs).
func supFlags(overrides ...string) []string {
	f := map[string]string{"--ttl": supTTL, "--kill-grace": supKillGrace}
	for i := 0; i+1 < len(overrides); i += 2 {
		f[overrides[i]] = overrides[i+1]
	}
	return []string{"--ttl", f["--ttl"], "--kill-grace", f["--kill-grace"]}
}

// gateFile writes a gate of lease b with the phases' shell text.
func (s *sup) gateFile(phases ...string) string {
	var b strings.Builder
	b.WriteString("kind: b\nphases:\n")
	for i, p := range phases {
		fmt.Fprintf(&b, "  - name: phase%d\n    run: |\n", i+1)
		for _, l := range strings.Split(p, "\n") {
			b.WriteString("      " + l + "\n")
		}
	}
	s.write("gate.yaml", b.String(), 0o644)
	return "gate.yaml"
}

// argv is pool-run's command line for mode: the command `sh work.sh
// WORK...`, or for a gate, phases (default: that same command as the one
// phase).
func (s *sup) argv(mode string, flags, work, phases []string) []string {
	if mode == "gate" {
		if phases == nil {
			phases = []string{"sh work.sh " + strings.Join(work, " ")}
		}
		return append([]string{"--gate", s.gateFile(phases...)}, flags...)
	}
	return append(append(append([]string{"--kind", "b"}, flags...), "--", "sh", "work.sh"), work...)
}

// shellLine is pool-run's command line for mode at the tmux shell: in
// plain mode its stdin is a pipe, its stdout and stderr the terminal.
func (s *sup) shellLine(mode string, flags, work, phases []string) string {
	words := []string{"./pool-run"}
	for _, a := range s.argv(mode, flags, work, phases) {
		words = append(words, shq(a))
	}
	line := strings.Join(words, " ")
	if mode == "plain" {
		line = "true | " + line
	}
	return line
}

// proc is pool-run started by a test.
type proc struct {
	t      *testing.T
	c      *exec.Cmd
	term   *terminal // pty mode
	errf   string    // pool-run's stderr, in plain and gate modes
	exited chan struct{}
	code   int
	end    time.Time // when the test saw it exit
	before string    // stty -g of the terminal before, pty mode
}

// launch starts pool-run: plain and gate modes with stdin from /dev/null
// and stdout, stderr to files; pty mode as the session leader of a
// terminal, as a login shell's job would be.
func (s *sup) launch(mode string, flags, work, phases []string) *proc {
	s.t.Helper()
	c := s.cmd(s.argv(mode, flags, work, phases)...)
	c.Env = append(c.Env, goraceQuick)
	p := &proc{t: s.t, c: c, exited: make(chan struct{})}
	if mode == "pty" {
		p.term = newTerminal(s.t, 30, 120)
		c.Stdin, c.Stdout, c.Stderr = p.term.tty, p.term.tty, p.term.tty
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		p.before = sttyOf(s.t, p.term.tty)
	} else {
		out, err := os.Create(s.path("stdout"))
		if err != nil {
			s.t.Fatal(err)
		}
		defer out.Close()
		p.errf = s.path("stderr")
		errf, err := os.Create(p.errf)
		if err != nil {
			s.t.Fatal(err)
		}
		defer errf.Close()
		c.Stdout, c.Stderr = out, errf
	}
	if err := c.Start(); err != nil {
		s.t.Fatal(err)
	}
	go func() {
		_ = c.Wait()
		p.end = time.Now()
		p.code = c.ProcessState.ExitCode()
		close(p.exited)
	}()
	s.t.Cleanup(func() {
		_ = c.Process.Kill()
		<-p.exited
	})
	return p
}

// log is what pool-run (and its guardian) wrote on stderr.
func (p *proc) log() string {
	if p.term != nil {
		return p.term.text()
	}
	b, _ := os.ReadFile(p.errf)
	return string(b)
}

// closingLog is the log once pool-run's closing line ("pool-run: held
// ...") is in it: on a terminal, the test reads it a little after
// pool-run wrote it.
func (p *proc) closingLog() string {
	waitFor(2*time.Second, func() bool { return strings.Contains(p.log(), "pool-run: held ") })
	return p.log()
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.c.Process.Signal(sig); err != nil {
		p.t.Fatalf("%v to pool-run: %v", sig, err)
	}
}

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// wait waits for pool-run's exit and returns its status.
func (p *proc) wait(within time.Duration, after string) int {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(within):
		p.t.Fatalf("pool-run still running %s after %s; it wrote:\n%s", within, after, p.log())
		return 0
	}
}

// sttyUnchanged checks the terminal's modes against those before the run.
func (p *proc) sttyUnchanged() {
	p.t.Helper()
	if p.term == nil {
		return
	}
	if after := sttyOf(p.t, p.term.tty); after != p.before {
		p.t.Errorf("the terminal's modes changed: stty -g was %s, is %s", p.before, after)
	}
}

// sttyRaw checks that pool-run has changed the terminal (raw mode), so
// that its restoration is something to check.
func (p *proc) sttyRaw() {
	p.t.Helper()
	if p.term != nil && sttyOf(p.t, p.term.tty) == p.before {
		p.t.Errorf("the terminal is not raw while the work runs: its restoration proves nothing")
	}
}

func sttyOf(t *testing.T, tty *os.File) string {
	t.Helper()
	c := exec.Command("stty", "-g")
	c.Stdin = tty
	out, err := c.Output()
	if err != nil {
		t.Fatalf("stty -g: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// waitFor polls cond every 10 ms until within.
func waitFor(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitReady waits for the work's ready file and for n pids and 3 ticks:
// the work and what it started run.
func (s *sup) waitReady(n int) {
	s.t.Helper()
	s.waitFile("ready")
	if !waitFor(10*time.Second, func() bool { return len(s.pids()) >= n && len(s.ticks()) >= 3 }) {
		s.t.Fatalf("the work recorded %d pids (want %d) and %d ticks", len(s.pids()), n, len(s.ticks()))
	}
}

func (s *sup) pids() []int {
	b, _ := os.ReadFile(s.path("pids"))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// ticks are the stamps written so far, in ns since the epoch.
func (s *sup) ticks() []int64 {
	b, _ := os.ReadFile(s.path("ticks"))
	var out []int64
	for _, l := range strings.Split(string(b), "\n") {
		if n, err := strconv.ParseInt(strings.TrimSpace(l), 10, 64); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// ticksIn are the stamps in (from, to].
func (s *sup) ticksIn(from, to time.Time) []int64 {
	var out []int64
	for _, n := range s.ticks() {
		if n > from.UnixNano() && n <= to.UnixNano() {
			out = append(out, n)
		}
	}
	return out
}

func latest(ns []int64, since time.Time) time.Duration {
	m := ns[0]
	for _, n := range ns {
		m = max(m, n)
	}
	return time.Duration(m - since.UnixNano())
}

// state describes a process: its state letter and command line.
func state(pid int) string {
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return "gone"
	}
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return fmt.Sprintf("state %c: %s", st.State, strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")))
}

// everything describes the processes in the test's directory: pool-run,
// its guardian, the work.
func (s *sup) everything() string {
	var b strings.Builder
	for _, pid := range s.strays() {
		fmt.Fprintf(&b, "\n  %d %s", pid, state(pid))
	}
	return b.String()
}

func (s *sup) states() string {
	var b strings.Builder
	for _, pid := range s.pids() {
		fmt.Fprintf(&b, "\n  %d %s", pid, state(pid))
	}
	return b.String()
}

// gone checks, at the moment cut stands for, that every process the work
// recorded is gone, then that no stamp later than cut was written.
func (s *sup) gone(cut time.Time, what string) {
	s.t.Helper()
	left := false
	for _, pid := range s.pids() {
		if alive(pid) {
			left = true
			s.t.Errorf("%s: process %d of the work is still running (%s)", what, pid, state(pid))
		}
	}
	if left {
		s.t.Logf("%s %s after it, the processes in the test's directory:%s", what, time.Since(cut).Round(time.Millisecond), s.everything())
	}
	time.Sleep(time.Until(cut.Add(settle)))
	if late := s.ticksIn(cut.Add(tickSlack), time.Now().Add(time.Hour)); len(late) > 0 {
		s.t.Errorf("%s: %d stamp(s) in ticks after that moment, the latest %s after it", what, len(late), latest(late, cut))
	}
}

// stoppedSince checks that the work wrote no stamp from stopWithin after
// stop until now.
func (s *sup) stoppedSince(stop time.Time, what string) {
	s.t.Helper()
	if late := s.ticksIn(stop.Add(stopWithin), time.Now()); len(late) > 0 {
		s.t.Errorf("the work ran on while %s: %d stamp(s) from %s after it on, the latest %s after it; its processes:%s",
			what, len(late), stopWithin, latest(late, stop), s.states())
	}
}

// takeOver is the successor: it tries to acquire lease b every 5 ms and
// returns when it holds it, with that moment.
func (s *sup) takeOver(within time.Duration) (time.Time, *lease.Acquisition) {
	s.t.Helper()
	st := s.openStore()
	deadline := time.Now().Add(within)
	for {
		acq, err := st.Acquire(context.Background(), lease.Request{Kind: "b", Owner: "successor", TTLMinutes: 1})
		if err == nil {
			return time.Now(), acq
		}
		if time.Now().After(deadline) {
			var held *lease.HeldError
			if errors.As(err, &held) {
				err = fmt.Errorf("held by %q", held.Record.Owner)
			}
			s.t.Fatalf("no successor could acquire lease b within %s: %v; the processes in the test's directory:%s", within, err, s.everything())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// successorHolds checks that the successor's lease was left alone.
func (s *sup) successorHolds(acq *lease.Acquisition) {
	s.t.Helper()
	st, err := s.openStore().Status(context.Background(), "b")
	if err != nil {
		s.t.Fatal(err)
	}
	if st.State != lease.Held || st.Record == nil || st.Record.Token != acq.Record.Token {
		s.t.Errorf("the successor's lease was touched: %s %+v", st.State, st.Record)
	}
}

func (s *sup) leaseFree() {
	s.t.Helper()
	if st := s.state("b"); st != lease.Free {
		s.t.Errorf("lease b is %s after pool-run exited, want free", st)
	}
}

// strays are the live processes, other than those of skip, whose working
// directory is the test's: what is left of pool-run, its guardian and
// the work.
func (s *sup) strays(skip ...int) []int {
	dir, _ := filepath.EvalSymlinks(s.dir)
	ents, _ := os.ReadDir("/proc")
	var out []int
next:
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !alive(pid) {
			continue
		}
		for _, k := range skip {
			if pid == k {
				continue next
			}
		}
		if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil && (cwd == s.dir || cwd == dir) {
			out = append(out, pid)
		}
	}
	return out
}

// noStrays checks that nothing is left running in the test's directory
// (the guardian may take a moment to exit after pool-run died).
func (s *sup) noStrays(skip ...int) {
	s.t.Helper()
	var left []int
	if !waitFor(2*time.Second, func() bool { left = s.strays(skip...); return len(left) == 0 }) {
		for _, pid := range left {
			s.t.Errorf("process %d is still running in the test's directory (%s)", pid, state(pid))
		}
	}
}

// killStrays ends what a failed run left behind, by pid.
func (s *sup) killStrays() {
	for range 3 {
		left := s.strays()
		if len(left) == 0 {
			return
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		waitFor(time.Second, func() bool { return len(s.strays()) == 0 })
	}
}

// checkNextPhase checks, from what a gate's second phase (nextPhase)
// wrote, that nothing of the first phase ran when it began.
func (s *sup) checkNextPhase() {
	s.t.Helper()
	b, err := os.ReadFile(s.path("next.start"))
	if err != nil {
		s.t.Errorf("the next phase did not run: %v", err)
		return
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		s.t.Fatalf("next.start: %v", err)
	}
	start := time.Unix(0, ns)
	if late := s.ticksIn(start.Add(tickSlack), time.Now().Add(time.Hour)); len(late) > 0 {
		s.t.Errorf("what the first phase started ticked on into the next phase: %d stamp(s), the latest %s after it began", len(late), latest(late, start))
	}
	if b, _ := os.ReadFile(s.path("alive.next")); len(strings.TrimSpace(string(b))) > 0 {
		s.t.Errorf("processes of the first phase were still running when the next one began: %s", strings.Fields(string(b)))
	}
}

// endedClean checks a run that ended by itself: exit 0; in a gate, nothing
// of the first phase in the next; nothing left, the lease free and the
// terminal's modes as they were.
func (s *sup) endedClean(p *proc, mode string, code int) {
	s.t.Helper()
	if code != 0 {
		s.t.Errorf("exit %d, want 0; stderr:\n%s", code, p.closingLog())
	}
	if mode == "gate" {
		s.checkNextPhase()
	}
	s.gone(p.end, "after pool-run exited")
	s.leaseFree()
	p.sttyUnchanged()
	s.noStrays()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func bindable(port int) error {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err == nil {
		l.Close()
	}
	return err
}

// TestSuperviseCtrlZResumes: Ctrl-Z at bash stops the work with pool-run
// (no tick while stopped), fg continues it (ticks again), and pool-run
// exits with the work's status, leaving nothing, the lease free and the
// terminal's modes as they were.
func TestSuperviseCtrlZResumes(t *testing.T) {
	t.Parallel()
	for _, mode := range supModes {
		t.Run(mode, func(t *testing.T) {
			s := newSup(t)
			sh := s.shell()
			sh.line("stty -g > stty.before; " + s.shellLine(mode, supFlags(), []string{"run", "exit=7"}, nil))
			s.waitReady(1)
			stop := time.Now()
			sh.key("C-z")
			sh.waitScreen("Stopped", 5*time.Second)
			time.Sleep(time.Second) // well within the TTL
			s.stoppedSince(stop, "pool-run was stopped by Ctrl-Z")
			fg := time.Now()
			sh.line(`fg; echo "$? $(date +%s%N)" > exit.txt; stty -g > stty.after`)
			if !waitFor(5*time.Second, func() bool { return len(s.ticksIn(fg, time.Now().Add(time.Hour))) >= 2 }) {
				t.Errorf("the work did not run again after fg; its processes:%s\nscreen:\n%s", s.states(), sh.screen())
			}
			s.touch("stop")
			code, end := sh.exitStatus(s, 10*time.Second)
			if code != 7 {
				t.Errorf("exit %d, want the work's 7; screen:\n%s", code, sh.screen())
			}
			s.gone(end, "after pool-run exited")
			s.leaseFree()
			sh.sttyUnchanged(s)
			s.noStrays(sh.pane)
		})
	}
}

// TestSuperviseCtrlZLapsed: Ctrl-Z, then the lease lapses and a successor
// takes it; the work, stopped, was killed before that and never ran
// again; fg ends pool-run with 75, the successor's lease untouched.
func TestSuperviseCtrlZLapsed(t *testing.T) {
	t.Parallel()
	for _, mode := range supModes {
		t.Run(mode, func(t *testing.T) {
			s := newSup(t)
			sh := s.shell()
			sh.line("stty -g > stty.before; " + s.shellLine(mode, supFlags(), []string{"run", "exit=7"}, nil))
			s.waitReady(1)
			stop := time.Now()
			sh.key("C-z")
			sh.waitScreen("Stopped", 5*time.Second)
			took, acq := s.takeOver(10 * time.Second)
			s.stoppedSince(stop, "pool-run was stopped by Ctrl-Z")
			s.gone(took, "once a successor acquired the lease")
			sh.line(`fg; echo "$? $(date +%s%N)" > exit.txt; stty -g > stty.after`)
			code, _ := sh.exitStatus(s, 10*time.Second)
			if code != 75 {
				t.Errorf("exit %d after fg past the lease's TTL, want 75; screen:\n%s", code, sh.screen())
			}
			s.gone(took, "after fg")
			s.successorHolds(acq)
			sh.sttyUnchanged(s)
			s.noStrays(sh.pane)
		})
	}
}

// TestSuperviseKillPoolRun: pool-run is SIGKILLed while the work and a
// setsid'd grandchild (ignoring SIGTERM) run. The guardian ends them all,
// gives the terminal its modes back and releases the lease, which the
// successor gets at once (not by waiting out the TTL).
func TestSuperviseKillPoolRun(t *testing.T) {
	t.Parallel()
	for _, mode := range supModes {
		t.Run(mode, func(t *testing.T) {
			s := newSup(t)
			p := s.launch(mode, supFlags(), []string{"run", "setsid"}, nil)
			s.waitReady(2)
			p.sttyRaw()
			kill := time.Now()
			p.signal(syscall.SIGKILL)
			p.wait(5*time.Second, "SIGKILL")
			took, acq := s.takeOver(10 * time.Second)
			if acq.TookOverExpired || took.Sub(kill) >= supTTLDur {
				t.Errorf("the lease was not released after pool-run died: the successor got it %s after the kill (took over an expired lease: %v)",
					took.Sub(kill).Round(time.Millisecond), acq.TookOverExpired)
			}
			s.gone(took, "once a successor acquired the lease")
			if !waitFor(2*time.Second, func() bool { return strings.Contains(p.log(), "pool-run: guardian: released b") }) {
				t.Errorf("no 'pool-run: guardian: released b' line on stderr:\n%s", p.log())
			}
			s.successorHolds(acq)
			p.sttyUnchanged()
			s.noStrays()
		})
	}
}

// TestSuperviseStopPastTTL: pool-run alone is SIGSTOPped for longer than
// the TTL. The guardian stops the work (and its setsid'd grandchild)
// within ~0.1 s and kills it before the lease can lapse; a successor takes
// the lease; SIGCONT then ends pool-run with 75, the successor's lease
// untouched.
func TestSuperviseStopPastTTL(t *testing.T) {
	t.Parallel()
	for _, mode := range supModes {
		t.Run(mode, func(t *testing.T) {
			s := newSup(t)
			p := s.launch(mode, supFlags(), []string{"run", "setsid"}, nil)
			s.waitReady(2)
			stop := time.Now()
			p.signal(syscall.SIGSTOP)
			took, acq := s.takeOver(10 * time.Second)
			s.stoppedSince(stop, "pool-run was stopped (SIGSTOP)")
			s.gone(took, "once a successor acquired the lease")
			p.signal(syscall.SIGCONT)
			if code := p.wait(10*time.Second, "SIGCONT"); code != 75 {
				t.Errorf("exit %d after SIGCONT past the TTL, want 75; stderr:\n%s", code, p.closingLog())
			}
			s.gone(took, "after SIGCONT")
			s.successorHolds(acq)
			p.sttyUnchanged()
			s.noStrays()
		})
	}
}

// TestSuperviseTostop: with `stty tostop` on the terminal, a work that
// writes to it (echo) completes instead of being stopped by SIGTTOU.
func TestSuperviseTostop(t *testing.T) {
	t.Parallel()
	for _, mode := range supModes {
		t.Run(mode, func(t *testing.T) {
			s := newSup(t)
			sh := s.shell()
			work := []string{"run", "leave", "say=hi-from-work"}
			sh.line("stty tostop; stty -a > stty.a; stty -g > stty.before; " + s.shellLine(mode, supFlags(), work, nil) +
				`; echo "$? $(date +%s%N)" > exit.txt; stty -g > stty.after`)
			code, end := sh.exitStatus(s, 10*time.Second)
			if code != 0 {
				t.Errorf("exit %d, want 0; screen:\n%s", code, sh.screen())
			}
			if !strings.Contains(sh.screen(), "hi-from-work") {
				t.Errorf("the work's output is not on the terminal:\n%s", sh.screen())
			}
			if a, _ := os.ReadFile(s.path("stty.a")); !regexp.MustCompile(`(^|\s)tostop(\s|$)`).Match(a) {
				t.Errorf("tostop was not set on the terminal: %s", a)
			}
			s.gone(end, "after pool-run exited")
			s.leaseFree()
			sh.sttyUnchanged(s)
			s.noStrays(sh.pane)
		})
	}
}

// TestSuperviseBackgroundJob: the work leaves a background job that
// ignores SIGTERM (and SIGHUP, which would otherwise end it in pty mode
// when the work's session leader exits). In a gate, the phase itself
// starts two with `&`: a program, and a loop of the phase's own shell
// (which runs inside the phase's interpreter and starts a program per
// tick). They are gone before the next phase and before pool-run exits.
func TestSuperviseBackgroundJob(t *testing.T) {
	t.Parallel()
	for _, mode := range supModes {
		t.Run(mode, func(t *testing.T) {
			s := newSup(t)
			phases := []string{`trap '' TERM
while :; do date +%s%N >> ticks; sleep 0.1; done &
sh work.sh ticker &
sh work.sh waitpids 1
echo up > ready
until [ -e stop ]; do sleep 0.05; done`, nextPhase}
			p := s.launch(mode, supFlags(), []string{"run", "bg"}, phases)
			want := 2
			if mode == "gate" {
				want = 1
			}
			s.waitReady(want)
			p.sttyRaw()
			s.touch("stop")
			code := p.wait(10*time.Second, "the work ended")
			if log := p.closingLog(); mode != "gate" && !strings.Contains(log, "the work left") {
				t.Errorf("pool-run did not say the work left processes behind:\n%s", log)
			}
			s.endedClean(p, mode, code)
		})
	}
}

// TestSuperviseSetsidGrandchild: the work leaves a grandchild in a
// session of its own, ignoring SIGTERM. It is gone before the next phase
// and before pool-run exits.
func TestSuperviseSetsidGrandchild(t *testing.T) {
	t.Parallel()
	for _, mode := range supModes {
		t.Run(mode, func(t *testing.T) {
			s := newSup(t)
			p := s.launch(mode, supFlags(), []string{"run", "setsid"}, []string{"sh work.sh run setsid", nextPhase})
			s.waitReady(2)
			s.touch("stop")
			s.endedClean(p, mode, p.wait(10*time.Second, "the work ended"))
		})
	}
}

// TestSuperviseDetachedPort: the work leaves a detached server (setsid,
// stdio on /dev/null) holding a TCP port; the port is free the moment
// pool-run exits.
func TestSuperviseDetachedPort(t *testing.T) {
	t.Parallel()
	for _, mode := range supModes {
		t.Run(mode, func(t *testing.T) {
			s := newSup(t)
			needed(t, "python3", "the detached server that holds a port is a python3 script")
			port := freePort(t)
			work := []string{"run", "port=" + strconv.Itoa(port)}
			p := s.launch(mode, supFlags(), work, []string{"sh work.sh " + strings.Join(work, " "), nextPhase})
			s.waitReady(2)
			if bindable(port) == nil {
				t.Fatalf("port %d is bindable while the detached child should hold it", port)
			}
			s.touch("stop")
			code := p.wait(10*time.Second, "the work ended")
			if err := bindable(port); err != nil {
				t.Errorf("port %d is not bindable after pool-run exited: %v", port, err)
			}
			s.endedClean(p, mode, code)
		})
	}
}

// TestSuperviseDoubleInterrupt: with a 30 s kill grace and a work that
// ignores SIGINT (and SIGTERM), a first SIGINT (Ctrl-C on the terminal in
// pty mode) is forwarded and the work runs on; a second one ends it at
// once: pool-run exits 130 within 2 s.
func TestSuperviseDoubleInterrupt(t *testing.T) {
	t.Parallel()
	for _, mode := range supModes {
		t.Run(mode, func(t *testing.T) {
			s := newSup(t)
			p := s.launch(mode, supFlags("--kill-grace", "30s"), []string{"run", "trap-int", "trap-term"}, nil)
			s.waitReady(1)
			interrupt := func() {
				if p.term != nil {
					if _, err := p.term.ptmx.Write([]byte{3}); err != nil { // Ctrl-C
						t.Fatal(err)
					}
					return
				}
				p.signal(syscall.SIGINT)
			}
			first := time.Now()
			interrupt()
			time.Sleep(600 * time.Millisecond)
			if !p.running() || len(s.ticksIn(first.Add(150*time.Millisecond), time.Now())) < 2 {
				t.Fatalf("the first SIGINT ended the work (running: %v); the case needs a work that outlives it; stderr:\n%s", p.running(), p.log())
			}
			second := time.Now()
			interrupt()
			code := p.wait(5*time.Second, "a second SIGINT")
			if took := p.end.Sub(second); took > 2*time.Second {
				t.Errorf("pool-run took %s to exit after the second SIGINT, want it at once", took.Round(time.Millisecond))
			}
			if code != 130 {
				t.Errorf("exit %d, want 130; stderr:\n%s", code, p.closingLog())
			}
			s.gone(p.end, "after pool-run exited")
			s.leaseFree()
			p.sttyUnchanged()
			s.noStrays()
		})
	}
}
