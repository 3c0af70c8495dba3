package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/cli/storeopen"
	"github.com/durable-lease/durable-lease/internal/sys/cgroup"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/provision"
)

// The guardian is pool-run's own executable started again with
// guardianEnv set. It is the parent (and, on Linux, the subreaper) of the
// work, in a process group of its own so that neither the terminal's
// signals nor a kill of pool-run's group reach it, and it ends the work:
//
//   - when the time until which pool-run last confirmed the lease comes
//     without a renewal (pool-run hung, stopped or starved): SIGTERM a
//     grace before it, SIGKILL a margin before the lease could lapse;
//   - when pool-run dies (its end of the socket closes): SIGTERM, SIGKILL
//     after the grace or at that same time, whichever is first; then it
//     gives the terminal its modes back and releases the lease;
//   - when pool-run is stopped (SIGSTOP, a terminal stop): the work is
//     stopped too, and continued only after pool-run, running again, has
//     renewed the lease;
//   - when pool-run asks: a loss, a signal, a phase's timeout, the end.
//
// The work is over when the guardian has no process left below it, which
// with the subreaper covers processes that left the work's process group
// or session.
const guardianEnv = "DURABLE_LEASE_GUARDIAN"

// Values of guardianEnv, each followed by ":" and the first of the
// role's own descriptors (base): below it, from 3, are the descriptors the
// caller inherited, which reach the work in place (a `3>log` of the
// user's, a make jobserver's pipe).
const (
	asGuardian = "guardian"
	asPhase    = "phase"
	// asGuardianInMain is the guardian of an executable whose main
	// serves it ([ServeRoles]) once it has registered its store openers,
	// not runner's init.
	asGuardianInMain = "guardian-in-main"
	// asProbe exits at once: started into a cgroup, it shows that this
	// process can start children there (canStartInto).
	asProbe = "probe"
)

// rolesInMain says that this executable's main serves the guardian
// ([ServeRoles]): the guardian this process starts is told to wait for it.
var rolesInMain bool

// The guardian's own descriptors, from base: the socket to pool-run,
// pool-run's stderr (for the guardian's own lines), the terminal whose
// modes to restore (pool-run's stderr again when there is none), and the
// run's cgroup directory when it has one. A gate phase's interpreter has
// one: the pipe its phase comes on.
var fdControl, fdLog, fdTerminal, fdCgroup int

func init() {
	// pool-run starts its own executable as its guardian (and the
	// guardian as a gate phase's interpreter): any program that links
	// this package serves those roles, whatever its main does. A value
	// set by hand, without the descriptor pool-run passes, is ignored.
	role, base, ok := parseRole(os.Getenv(guardianEnv))
	if !ok {
		return
	}
	switch role {
	case asProbe:
		os.Exit(0)
	case asGuardian:
		if isFileType(base, unix.S_IFSOCK) {
			fdControl, fdLog, fdTerminal, fdCgroup = base, base+1, base+2, base+3
			os.Exit(guardianMain())
		}
	case asPhase:
		if isFileType(base, unix.S_IFIFO) {
			os.Exit(phaseMain(base))
		}
	}
}

// ServeRoles is for a main that registers store openers (etcd://, with
// storeopen.Register) and runs pool-run: called first thing once they are
// registered, it serves the guardian role pool-run started this
// executable in, if any (it does not return then), and makes the
// guardians this process starts wait for it. Served in init, as in an
// executable that does not call it, the guardian runs before main has
// registered anything, and cannot open an etcd:// store to release the
// lease of a pool-run that died.
func ServeRoles() {
	rolesInMain = true
	role, base, ok := parseRole(os.Getenv(guardianEnv))
	if ok && role == asGuardianInMain && isFileType(base, unix.S_IFSOCK) {
		fdControl, fdLog, fdTerminal, fdCgroup = base, base+1, base+2, base+3
		os.Exit(guardianMain())
	}
}

// parseRole reads guardianEnv's value.
func parseRole(v string) (role string, base int, ok bool) {
	role, n, found := strings.Cut(v, ":")
	if !found {
		return "", 0, false
	}
	base, err := strconv.Atoi(n)
	if err != nil || base < 3 || base > 1<<20 {
		return "", 0, false
	}
	return role, base, true
}

// isFileType says whether fd is open on a file of type t (S_IFSOCK, ...).
func isFileType(fd int, t uint32) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && uint32(st.Mode)&unix.S_IFMT == t
}

// passOn lists the descriptors a child of the guardian gets: 0, 1, 2, the
// ones pool-run passed on in place from 3 below base (inherited; closed
// where it passed none), then extra. Which ones those are pool-run says:
// a descriptor open here in a gap between them is the guardian's own (its
// runtime's, a cgroup's directory), opened after its exec.
func passOn(inherited []int, base int, extra ...uintptr) []uintptr {
	files := []uintptr{0, 1, 2}
	for fd := 3; fd < base; fd++ {
		if slices.Contains(inherited, fd) {
			files = append(files, uintptr(fd))
		} else {
			files = append(files, ^uintptr(0))
		}
	}
	return append(files, extra...)
}

// Ticks of the guardian's loop: how soon it sees that pool-run was
// stopped by SIGSTOP (Ctrl-Z is told at once) and that a deadline passed
// while the machine slept (a timer of the monotonic clock stands still
// meanwhile); faster while a stop is under way, to see the tree empty.
// Each wake-up of an idle Go process costs about 0.2 ms of CPU here, so
// the idle tick is what a guardian costs: 0.1% of a core.
const (
	// abandonAfter is how long a guardian whose pool-run is gone waits,
	// once it killed the work, to see it go before it exits anyway.
	abandonAfter = 10 * time.Second
	guardTick    = 250 * time.Millisecond
	stoppingTick = 5 * time.Millisecond
)

// nextTick is the time until the loop must look again: the next deadline
// if it comes before the idle tick.
func (g *guardian) nextTick() time.Duration {
	if !g.running {
		return guardTick
	}
	if g.stopping || g.exited {
		return stoppingTick
	}
	d := guardTick
	deadlines := []int64{g.termAt, g.hardAt}
	if g.suspended {
		deadlines = deadlines[1:] // a stopped work gets no SIGTERM
	}
	now := bootNow()
	for _, at := range deadlines {
		if left := time.Duration(at - now); left < d {
			d = max(left, time.Millisecond)
		}
	}
	return d
}

type guardian struct {
	c     *conn
	log   *os.File
	start *guardStart
	self  int
	cg    *cgroup.Group // the run's cgroup; nil for the process tree alone
	leafs int           // the cgroups made below it, one per start

	until, hardAt, termAt int64 // bootClock ns

	work       int // pid of the command or of a phase's interpreter
	pgid       int // the work's process group (the fallback tree)
	phase      bool
	running    bool
	exited     bool // the work's own process has ended
	status     int
	stopping   bool
	termRest   bool // the interpreter was asked to stop first; the rest on its exit
	killed     bool
	killedAt   int64 // bootClock ns of the first SIGKILL
	killAt     int64
	why        string
	left       int
	escaped    int // processes that left the run's cgroup, found below the subreaper
	suspended  bool
	forParent  bool // suspended because pool-run was seen stopped
	askedRenew bool

	parentGone bool
	done       bool
	restored   bool
}

func guardianMain() int {
	for _, fd := range []int{fdControl, fdLog, fdTerminal, fdCgroup} {
		unix.CloseOnExec(fd) // the work gets none of them
	}
	ctl := os.NewFile(uintptr(fdControl), "pool-run control")
	g := &guardian{c: newConn(ctl), log: os.NewFile(uintptr(fdLog), "pool-run stderr"), self: os.Getpid()}
	// Terminal signals are pool-run's to handle; catch them here (an
	// ignored signal would be inherited by the work across exec).
	quiet := make(chan os.Signal, 8)
	signal.Notify(quiet, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGTSTP, syscall.SIGPIPE)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	if err := becomeSubreaper(); err != nil {
		g.say("cannot become the subreaper of the work (%v); only its process group is tracked", err)
	}
	// Threads the Go runtime would otherwise make later, made now, while
	// pool-run acquires and sends the start: a work that forks up to the
	// user's process limit must not leave the guardian unable to make the
	// thread it needs to act. The work starts once they are made.
	warmed := make(chan struct{})
	go func() { warmThreads(); close(warmed) }()
	msgs := g.c.recv()
	first, ok := <-msgs
	if !ok {
		return 0 // pool-run gave up before it held anything (a refusal, a signal)
	}
	if first.Op != opStart || first.Start == nil {
		fmt.Fprintln(os.Stderr, "pool-run: the guardian is started by pool-run, not by hand")
		return 2
	}
	g.start = first.Start
	g.setUntil(g.start.Until)
	if err := g.takeFiles(); err != nil {
		_ = g.c.send(guardMsg{Op: opFailed, Why: "the work's descriptors: " + err.Error(), Internal: true})
		return 3
	}
	if g.start.Cgroup != "" {
		cg, err := cgroup.FromFD(fdCgroup, g.start.Cgroup)
		if err != nil {
			_ = g.c.send(guardMsg{Op: opFailed, Why: "the run's cgroup: " + err.Error(), Internal: true})
			return 3
		}
		g.cg = cg
	}
	<-warmed
	if os.Getppid() != g.start.Parent {
		g.parentGone = true // pool-run died before the guardian ran
	}
	if g.start.Path != "" && !g.parentGone {
		g.run(g.start.Path, g.start.Argv, g.start.Env, g.start.Dir, nil)
	}
	tick := time.NewTimer(0)
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				msgs = nil
				g.parentDied()
			} else {
				g.handle(m)
			}
		case <-chld:
			g.reap()
		case <-term:
			g.why = whyTerminated
			g.beginStop(g.start.Grace)
		case <-quiet:
		case <-tick.C:
		}
		g.reap()
		g.step()
		if !g.running && (g.done || g.parentGone) {
			break
		}
		if g.parentGone && g.killed && bootNow()-g.killedAt > int64(abandonAfter) {
			// Nobody waits for this guardian any more, and what it killed
			// has not been seen to go (a process stuck in the kernel dies
			// when it wakes): it must not poll for ever.
			g.say("the work was killed %s ago and is not seen gone; leaving it", abandonAfter)
			break
		}
		tick.Reset(g.nextTick())
	}
	if g.parentGone && !g.done {
		g.restoreTerminal()
		if g.cg != nil {
			_ = g.cg.Remove() // empty by now; never left for the next holder to find
		}
		g.release()
	}
	return 0
}

// takeFiles puts the descriptors that came with the start message in
// their places: the work's stdin, stdout and stderr on 0, 1 and 2 (where
// pool-run started the guardian on /dev/null), then the terminal whose
// modes to restore (when there is one) and the run's cgroup (when it has
// one) on the places their placeholders hold.
func (g *guardian) takeFiles() error {
	fds := g.c.files()
	defer func() {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
	}()
	places := []int{0, 1, 2}
	if g.start.Termios != nil {
		places = append(places, fdTerminal)
	}
	if g.start.Cgroup != "" {
		places = append(places, fdCgroup)
	}
	if len(fds) != len(places) {
		return fmt.Errorf("got %d descriptors with the start, want %d", len(fds), len(places))
	}
	for i, fd := range fds {
		if err := dupOnto(fd, places[i]); err != nil {
			return err
		}
		if places[i] > 2 {
			unix.CloseOnExec(places[i]) // the work gets none of the guardian's own
		}
	}
	return nil
}

func (g *guardian) say(format string, args ...any) {
	fmt.Fprintf(g.log, "pool-run: guardian: "+format+"\n", args...)
}

func (g *guardian) setUntil(until int64) {
	g.until = until
	g.hardAt = until - g.start.Margin
	g.termAt = g.hardAt - g.start.WatchGrace
}

func (g *guardian) handle(m guardMsg) {
	switch m.Op {
	case opUntil:
		g.setUntil(m.Until)
	case opPhase:
		if g.running || m.Phase == nil {
			return
		}
		if m.Until != 0 {
			g.setUntil(m.Until) // renewed while pool-run reset the slot
		}
		data, _ := json.Marshal(m.Phase)
		g.run("", nil, nil, m.Phase.Dir, data)
	case opSignal:
		if g.running && !g.suspended {
			g.signalAll(syscall.Signal(m.Sig))
		}
	case opStop:
		g.why = whyStopped
		g.beginStop(m.Grace)
	case opKill:
		g.why = whyStopped
		g.kill()
	case opSuspend:
		g.suspend()
		_ = g.c.send(guardMsg{Op: opSuspended})
	case opResume:
		g.setUntil(m.Until)
		g.forParent, g.askedRenew = false, false
		if g.suspended && !g.killed && bootNow() < g.hardAt {
			g.suspended = false
			g.resumeAll()
		}
	case opDone:
		g.done = true
	}
}

// run starts the command, or a phase's interpreter (phase is its JSON).
func (g *guardian) run(path string, argv, env []string, dir string, phase []byte) {
	if bootNow() >= g.termAt {
		// No renewal came in time (the lease may lapse): nothing starts.
		g.why = whyDeadline
		_ = g.c.send(guardMsg{Op: opExited, Why: whyDeadline})
		return
	}
	attr := &syscall.SysProcAttr{}
	if g.cg != nil {
		// The work's first instruction runs in the run's cgroup (clone3
		// with CLONE_INTO_CGROUP), in a cgroup of its own below it: a
		// cgroup once killed (the leftovers of the phase before) kills
		// every process started into it.
		g.leafs++
		leaf, err := g.cg.Sub("start-" + strconv.Itoa(g.leafs))
		if err != nil {
			_ = g.c.send(guardMsg{Op: opFailed, Why: "the run's cgroup: " + err.Error(), Internal: true})
			return
		}
		defer leaf.Close()
		intoCgroup(attr, leaf.FD())
	}
	files := passOn(g.start.Inherited, fdControl)
	var pipeR, pipeW *os.File
	if phase != nil {
		// The interpreter and its programs have no controlling terminal:
		// nothing of a phase can be stopped by one.
		var err error
		if pipeR, pipeW, err = os.Pipe(); err != nil {
			_ = g.c.send(guardMsg{Op: opFailed, Why: limitHint(err).Error(), Internal: true})
			return
		}
		path, argv = selfExe(), []string{"pool-run: gate phase"}
		env = []string{guardianEnv + "=" + asPhase + ":" + strconv.Itoa(len(files))}
		files = append(files, pipeR.Fd())
		attr.Setsid = true
	} else {
		env = withoutVar(env, guardianEnv)
		// A session of its own: on its pseudo-terminal, whose foreground
		// it is, or without a controlling terminal, so that no terminal
		// can stop it (/dev/tty is absent for it rather than a terminal
		// whose background it would be stopped in).
		attr.Setsid = true
		if g.start.Ctty >= 0 {
			attr.Setctty, attr.Ctty = true, g.start.Ctty
		}
	}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Dir: dir, Env: env, Files: files, Sys: attr})
	if pipeR != nil {
		pipeR.Close()
	}
	if err != nil {
		if pipeW != nil {
			pipeW.Close()
		}
		if phase != nil || !commandsFault(err, path) {
			// Not the command's fault: the run could not fork (a limit),
			// or could not start it in its cgroup.
			_ = g.c.send(guardMsg{Op: opFailed, Why: limitHint(err).Error(), Internal: true})
			return
		}
		g.failed(fmt.Errorf("%s: %w", path, err))
		return
	}
	if pipeW != nil {
		_, _ = pipeW.Write(phase)
		pipeW.Close()
	}
	g.work, g.pgid, g.running, g.exited, g.status = pid, pid, true, false, 0
	g.phase, g.stopping, g.termRest, g.killed, g.why, g.left = phase != nil, false, false, false, "", 0
	if phase == nil && !g.start.Phases {
		// The command's streams are the work's alone now: the pseudo-
		// terminal's other side must see them close when the work ends.
		null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err == nil {
			for fd := 0; fd <= 2; fd++ {
				_ = dupOnto(int(null.Fd()), fd)
			}
			null.Close()
		}
	}
	_ = g.c.send(guardMsg{Op: opStarted, Pid: pid})
}

// commandsFault says whether a failed start of the program at path is
// the program's own doing (126 or 127, as a shell says), rather than the
// run's: the program is missing or not executable. pool-run checked both
// before acquiring; a program replaced since is still the program's.
func commandsFault(err error, path string) bool {
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.ETXTBSY),
		errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTDIR):
		return true
	case errors.Is(err, syscall.EACCES):
		return unix.Access(path, unix.X_OK) != nil
	}
	return false
}

func (g *guardian) failed(err error) {
	_ = g.c.send(guardMsg{Op: opFailed, Why: err.Error()})
}

// reap collects every child that ended (the work's processes re-parented
// here included) and notes the work's own status.
func (g *guardian) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
		if pid != g.work || !g.running || g.exited {
			continue
		}
		switch {
		case ws.Signaled():
			g.exited, g.status = true, ExitSignalBase+int(ws.Signal())
		case ws.Exited():
			g.exited, g.status = true, ws.ExitStatus()
		}
	}
}

// step applies the deadlines, follows pool-run's state and finishes a
// work whose processes are all gone.
func (g *guardian) step() {
	now := bootNow()
	if g.running && !g.killed {
		switch {
		case now >= g.hardAt:
			if g.why == "" {
				g.why = whyDeadline
			}
			g.kill()
		case now >= g.killAt && g.stopping:
			g.kill()
		case now >= g.termAt && !g.stopping && !g.suspended:
			// A stopped work waits for a renewal until the hard deadline:
			// it is never continued unconfirmed, only killed.
			g.why = whyDeadline
			g.beginStop(g.hardAt - now)
		}
	}
	if !g.parentGone {
		switch st := processState(g.start.Parent); {
		case st == 0:
			g.parentDied()
		case st == 'T' || st == 't':
			if g.running && !g.suspended {
				g.suspend()
				g.forParent = true
			}
		case g.forParent && !g.askedRenew:
			g.askedRenew = true
			_ = g.c.send(guardMsg{Op: opConfirm})
		}
	}
	if g.running && g.exited {
		left := g.leftBehind()
		if left == 0 && noChildren() {
			if g.cg != nil && g.suspended {
				_ = g.cg.Thaw() // nothing left to stop; the next phase starts thawed
			}
			g.running = false
			_ = g.c.send(guardMsg{Op: opExited, Status: g.status, Why: g.why, Left: g.left, Escaped: g.escaped})
			return
		}
		switch {
		case !g.stopping:
			// The work ended and left processes behind: they go before
			// the lease does.
			g.left = left
			g.beginStop(g.start.Grace)
		case g.termRest:
			// The interpreter has stopped; now what it left.
			g.termRest = false
			g.signalAll(syscall.SIGTERM)
		}
		if g.killed {
			g.kill() // what was forked since the last pass
		}
	} else if g.killed && g.running {
		g.kill()
	}
}

// parentDied ends the work at once: nobody heartbeats for it any more.
func (g *guardian) parentDied() {
	if g.parentGone {
		return
	}
	g.parentGone = true
	if !g.running || g.done {
		return
	}
	g.say("pool-run (pid %d) is gone; stopping the work", g.start.Parent)
	g.restoreTerminal() // now, before the shell takes the terminal back
	g.why = whyStopped
	if g.suspended {
		g.kill()
		return
	}
	g.beginStop(g.start.Grace)
}

// The guardian's stop (beginStop, kill, step) is not procgroup.Stop, which
// provision uses for a phase's programs and pool-run for the work's group
// when the guardian is gone: the work here is the tree below the
// subreaper, whatever groups and sessions it moved to, its end is proven
// by waitid (noChildren) rather than by a scan, and the stop runs inside
// the guardian's loop, which must go on reaping, following pool-run and
// moving the kill earlier when the lease's deadline comes first. The
// sequence is the same: SIGTERM (and SIGCONT to a work it had stopped),
// SIGKILL after the grace, SIGKILL again while anything is left.

// beginStop sends SIGTERM to every process of the work (continuing them
// if they were stopped by pool-run, which the lease still covers) and
// sets SIGKILL for grace from now, or the hard deadline if sooner.
//
// A gate phase's interpreter gets it first and alone: it then starts no
// further command and stops its own. Signalled together, a command could
// die before the interpreter had seen its own signal, and the interpreter
// would go on to the phase's next command. What is left once it has
// exited gets SIGTERM then (step), and everything SIGKILL at the grace.
func (g *guardian) beginStop(grace int64) {
	if !g.running || g.killed {
		return
	}
	now := bootNow()
	at := g.hardAt
	if grace = max(grace, 0); grace < at-now {
		at = now + grace // no overflow: a grace of centuries is the deadline
	}
	if g.stopping {
		g.killAt = min(g.killAt, at)
		return
	}
	g.stopping, g.killAt = true, at
	if g.phase && !g.exited {
		g.termRest = true
		_ = syscall.Kill(g.work, syscall.SIGTERM)
	} else {
		g.signalAll(syscall.SIGTERM)
	}
	if g.suspended {
		g.suspended = false
		g.resumeAll()
	}
}

// kill sends SIGKILL to every process of the work; step repeats it until
// none is left, for processes forked meanwhile.
func (g *guardian) kill() {
	if !g.running {
		return
	}
	if !g.killed {
		g.killedAt = bootNow()
	}
	g.stopping, g.killed = true, true
	g.signalAll(syscall.SIGKILL)
	if g.cg != nil && g.suspended {
		// Killed processes die frozen or not; a cgroup left asked to
		// freeze would read as ended by someone taking the lease.
		_ = g.cg.Thaw()
	}
}

// signalAll sends sig to every process of the work: the run's cgroup
// (SIGKILL through cgroup.kill, which no fork escapes), and the processes
// below the subreaper that are not in it (the whole work, for the tree
// alone; those that left the cgroup, otherwise).
func (g *guardian) signalAll(sig syscall.Signal) {
	if g.cg != nil {
		if sig == syscall.SIGKILL {
			_ = g.cg.Kill()
		} else {
			_ = g.cg.Signal(sig)
		}
	}
	for _, p := range g.outside() {
		signalProc(p, sig)
	}
}

// outside lists the processes below the subreaper that the cgroup does
// not hold: with no cgroup, the whole work; with one, what left it (moved
// itself to another cgroup it may write), counted in g.escaped.
func (g *guardian) outside() []proc {
	all := descendants(g.self, g.pgid)
	if g.cg == nil {
		return all
	}
	in := g.cg.Ref().Path
	out := all[:0]
	for _, p := range all {
		if c := cgroupOf(p.pid); c != "" && c != in && !strings.HasPrefix(c, in+"/") {
			out = append(out, p)
		}
	}
	g.escaped = max(g.escaped, len(out))
	return out
}

// leftBehind counts the processes of the work still running once its own
// process ended: with a cgroup, the kernel's count says whether any is
// left (no walk), and only then are they counted; with the tree, the
// walk below the subreaper. A cgroup that is gone (removed by the
// successor that ended it) holds nothing.
func (g *guardian) leftBehind() int {
	if g.cg == nil {
		return len(descendants(g.self, g.pgid))
	}
	populated, err := g.cg.Populated()
	if errors.Is(err, cgroup.ErrNotFound) || err == nil && !populated {
		if noChildren() {
			return 0
		}
		return len(g.outside()) // children outside the cgroup, or zombies
	}
	procs, _ := g.cg.Procs()
	return max(len(procs), 1) + len(g.outside())
}

// resumeAll lets the work run again after suspend.
func (g *guardian) resumeAll() {
	if g.cg != nil {
		_ = g.cg.Thaw()
	}
	for _, p := range g.outside() {
		signalProc(p, syscall.SIGCONT)
	}
}

// suspend stops every process of the work, and returns once each is seen
// stopped (a fork between a look and a stop is caught by the next look).
// A cgroup is frozen: its processes, and any started into it later, stop
// at once and are not told (no SIGSTOP, which a shell would report).
func (g *guardian) suspend() {
	if !g.running || g.suspended || g.killed || g.exited {
		return // a work being killed, or whose own process ended, is being ended, not stopped
	}
	g.suspended = true
	if g.cg != nil && g.cg.Freeze() == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = g.cg.WaitFrozen(ctx)
		cancel()
		for _, p := range g.outside() {
			signalProc(p, syscall.SIGSTOP)
		}
		return
	}
	deadline := time.Now().Add(time.Second)
	// Two looks in a row that find everything stopped: a process being
	// re-parented while one look walks the tree is in neither list it
	// reads, but it is found by the next.
	for calm := 0; calm < 2; {
		calm++
		for _, p := range descendants(g.self, g.pgid) {
			if !p.stopped() {
				calm = 0
				signalProc(p, syscall.SIGSTOP)
			}
		}
		if !treeComplete || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// restoreTerminal gives the terminal the modes it had before pool-run
// made it raw. The guardian is in the terminal's background: SIGTTOU is
// ignored around the change, or it would stop the guardian.
func (g *guardian) restoreTerminal() {
	if g.start.Termios == nil || g.restored {
		return
	}
	g.restored = true
	// Once the shell has the terminal back it sets its own modes (a
	// readline in raw mode): those are not pool-run's to change.
	if fg, err := unix.IoctlGetInt(fdTerminal, unix.TIOCGPGRP); err == nil && fg != g.start.Pgrp {
		return
	}
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	_ = unix.IoctlSetTermios(fdTerminal, ioctlSetTermios, g.start.Termios)
}

// release gives the lease back for pool-run, which died holding it. A
// pool slot goes back as the plain lease it is: the pool's hold
// statistics miss that one hold.
func (g *guardian) release() {
	r := g.start.Release
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store, closeStore, err := storeopen.Open(ctx, r.Store, lease.WithOwnerPattern(r.OwnerPattern))
	if err == nil {
		defer func() { _ = closeStore() }()
		_, err = store.Release(ctx, lease.Ref{Kind: r.Kind, Owner: r.Owner, Token: r.Token})
	}
	if err != nil {
		g.say("could not release %s (%v); it frees itself after its TTL", r.Kind, err)
		return
	}
	g.say("released %s", r.Kind)
}

// phaseMain is a gate phase's interpreter: it reads the phase from
// descriptor fd and runs it with mvdan.cc/sh on the inherited streams.
func phaseMain(fd int) int {
	var ph guardPhase
	unix.CloseOnExec(fd)
	if err := json.NewDecoder(os.NewFile(uintptr(fd), "phase")).Decode(&ph); err != nil {
		fmt.Fprintln(os.Stderr, "pool-run: a gate phase is started by pool-run's guardian, not by hand")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	err := provision.Run(ctx, provision.Command{
		Script: ph.Script, Dir: ph.Dir, Env: ph.Env,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		KillGrace: time.Duration(ph.Grace), StopLeftovers: true,
	})
	var ee *provision.ExitError
	switch {
	case err == nil:
		return 0
	case ctx.Err() != nil:
		return ExitSignalBase + int(syscall.SIGTERM)
	case errors.As(err, &ee):
		return ee.Status
	}
	fmt.Fprintln(os.Stderr, "pool-run:", err)
	return 2
}

func withoutVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if len(kv) > len(name) && kv[len(name)] == '=' && kv[:len(name)] == name {
			continue
		}
		out = append(out, kv)
	}
	return out
}
