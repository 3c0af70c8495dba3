package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/procgroup"
	"github.com/durable-lease/durable-lease/lease"
)

// jobControl starts taking SIGTSTP for the session, until the returned
// function is called. Once notified, the Go runtime drops a SIGTSTP
// nobody listens for, so one channel serves the whole run. A process
// without a controlling terminal leaves SIGTSTP alone: nobody would be
// there to continue it (the kernel itself discards a terminal stop sent
// to an orphaned process group).
func (s *session) jobControl() func() {
	if !s.o.JobControl || !hasTerminal() {
		return func() {}
	}
	s.tstp = make(chan os.Signal, 1)
	signal.Notify(s.tstp, syscall.SIGTSTP)
	return func() { signal.Stop(s.tstp) }
}

// stopSelf stops this process (SIGSTOP) and returns once it is
// continued, never in the middle of a heartbeat.
func (s *session) stopSelf() {
	resume := s.hold.Pause()
	defer resume()
	// kill returns before the stop has taken hold of every thread: wait
	// for the SIGCONT that ends it, or the renewal after it would run
	// first, and be frozen inside the store's critical section.
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	defer signal.Stop(cont)
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	<-cont
}

// renewals carries the Hold's confirmed deadlines to the guardian.
type renewals struct {
	until atomic.Int64 // bootClock ns
	ch    chan struct{}
}

func newRenewals() *renewals { return &renewals{ch: make(chan struct{}, 1)} }

// note is the Hold's Renewed callback.
func (r *renewals) note(until time.Time) {
	r.until.Store(onBootClock(until))
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

// guard is pool-run's end of its guardian.
type guard struct {
	pid  int // the guardian's
	c    *conn
	msgs <-chan guardMsg
	gone chan struct{} // closed when the guardian has exited (and was waited for)
	err  error         // how it exited, once gone is closed
	work int           // the pid of the work (or phase) last started
	// copies are the copies of the work's streams that are not files,
	// through pipes (as exec.Cmd makes them): close waits for the output
	// ones, bounded.
	copies sync.WaitGroup
	stdinW *os.File // the write end of a copied stdin, closed by close
	warmed chan struct{}
	// inherited are the descriptors from 3 up passed on in place.
	inherited []int
	begun     bool
	released  bool
}

// spawnGuardian starts the guardian, before anything is acquired, so
// that its start (an exec of this executable and its runtime's and
// packages' initialisation) overlaps the acquisition instead of
// following it. It gets only its socket, pool-run's stderr (for its own
// lines) and the descriptors this process inherited (in place, for the
// work), with /dev/null as its streams; begin hands it the rest. A
// guardian whose pool-run closes the socket before begin exits at once:
// nothing was held and nothing ran. It runs this same executable.
func (o *Options) spawnGuardian() (*guard, error) {
	fds, err := socketpair()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGuardian, limitHint(err))
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "guardian"), os.NewFile(uintptr(fds[1]), "pool-run")
	defer theirs.Close()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		mine.Close()
		return nil, fmt.Errorf("%w: %v", ErrGuardian, limitHint(err))
	}
	defer null.Close()
	logf, ok := o.Log.(*os.File)
	if !ok {
		logf = null
	}
	// The descriptors this process inherited from 3 up (a `3>log`, a
	// jobserver's pipe) go to the guardian in place, and from it to the
	// work; the guardian's own come after them: its socket, the log, and
	// two places (held by the log meanwhile) for the terminal and the
	// cgroup, which begin sends.
	files := []uintptr{null.Fd(), null.Fd(), null.Fd()}
	var inherited []int
	for _, f := range inheritedFiles() {
		if f == nil {
			files = append(files, ^uintptr(0))
		} else {
			files = append(files, f.Fd())
			inherited = append(inherited, int(f.Fd()))
		}
	}
	base := len(files)
	files = append(files, theirs.Fd(), logf.Fd(), logf.Fd(), logf.Fd())
	role := asGuardian
	if rolesInMain {
		role = asGuardianInMain
	}
	env := append(withoutVar(os.Environ(), guardianEnv), fmt.Sprintf("%s=%s:%d", guardianEnv, role, base))
	// syscall.ForkExec, not os/exec: the first os.StartProcess of a
	// process checks that pidfds work by starting one more child.
	pid, err := syscall.ForkExec(selfExe(), []string{"pool-run (guardian)"}, &syscall.ProcAttr{
		Env: env, Files: files, Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		mine.Close()
		return nil, fmt.Errorf("%w: %v", ErrGuardian, limitHint(err))
	}
	g := &guard{pid: pid, c: newConn(mine), gone: make(chan struct{}), warmed: make(chan struct{}), inherited: inherited}
	// The Go runtime's threads, made while the acquire is on its way
	// rather than when a work that forks all it can has used them up:
	// begin waits for them before the work can start.
	go func() { warmThreads(); close(g.warmed) }()
	g.msgs = g.c.recv()
	go func() {
		g.err = waitFor(pid)
		close(g.gone)
	}()
	return g, nil
}

// waitFor waits for the child pid and says how it ended, as exec.Cmd's
// Wait would ("signal: killed", "exit status 3"); nil for a clean exit.
func waitFor(pid int) error {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err // reaped by someone else (reapOrphans): gone all the same
		}
		break
	}
	switch {
	case ws.Signaled():
		return fmt.Errorf("signal: %v", ws.Signal())
	case ws.ExitStatus() != 0:
		return fmt.Errorf("exit status %d", ws.ExitStatus())
	}
	return nil
}

// abandon lets a guardian that was never begun go: the socket closes,
// and it exits.
func (g *guard) abandon() {
	if g == nil || g.begun {
		return
	}
	g.c.shut()
}

// begin hands the guardian st and what the work runs on: its streams
// (a stream that is not a file is copied through a pipe, as exec.Cmd
// does), the terminal whose modes to restore, and the run's cgroup, as
// descriptors passed on the socket with the start message.
func (s *session) begin(g *guard, w *workIO, st *guardStart) error {
	g.begun = true
	// pool-run is the subreaper above the guardian: if the guardian dies,
	// what it left of the work comes here to be ended, not to init. Only
	// now, once the lease is held and provisioned: a provisioner's daemon
	// (started detached while the acquire and the provision ran) is not
	// the work's and must be left to init. The guardian starts the work
	// after the message below, so nothing of it can be orphaned before.
	_ = becomeSubreaper()
	// The guardian's deadlines (floor.go): SIGKILL a margin before the
	// time the lease is safely held until, SIGTERM a grace before that,
	// and never before a renewal late through a fault the store rides out.
	b := storeTimesOf(s.o.Store).budget(s.hold.Record().TTL(), s.hold.Interval(), s.o.KillGrace)
	margin, watchGrace := b.guard()
	st.Parent, st.Pgrp = os.Getpid(), syscall.Getpgrp()
	st.Until = s.renewals.until.Load()
	st.Margin, st.WatchGrace, st.Grace = int64(margin), int64(watchGrace), int64(s.o.KillGrace)
	st.Termios = w.saved
	st.Inherited = g.inherited
	st.Release = &guardRelease{Store: s.o.Store.Where(), Kind: s.held.Kind, Owner: s.held.Owner, Token: s.held.Token}
	if f := s.o.Store.OwnerPattern(); f != nil {
		st.Release.OwnerPattern = f.String()
	}
	var pass []int
	var theirs []*os.File // pipe ends and /dev/null, closed once sent
	defer func() {
		for _, f := range theirs {
			f.Close()
		}
	}()
	// A stream that is not a file goes through a pipe that this process
	// copies, as exec.Cmd does; none at all is /dev/null.
	pipe := func() (r, wr *os.File, err error) {
		if r, wr, err = os.Pipe(); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrGuardian, limitHint(err))
		}
		return r, wr, nil
	}
	if f, ok := w.stdin.(*os.File); ok && f != nil {
		pass = append(pass, int(f.Fd()))
	} else {
		r, wr, err := pipe()
		if err != nil {
			return err
		}
		theirs, g.stdinW = append(theirs, r), wr
		pass = append(pass, int(r.Fd()))
		if w.stdin == nil {
			wr.Close()
		} else {
			src := w.stdin
			go func() {
				_, _ = io.Copy(wr, src)
				wr.Close()
			}()
		}
	}
	for _, out := range []io.Writer{w.stdout, w.stderr} {
		if f, ok := out.(*os.File); ok && f != nil {
			pass = append(pass, int(f.Fd()))
			continue
		}
		r, wr, err := pipe()
		if err != nil {
			return err
		}
		theirs = append(theirs, wr)
		pass = append(pass, int(wr.Fd()))
		dst := out
		if dst == nil {
			dst = io.Discard
		}
		g.copies.Add(1)
		go func() {
			defer g.copies.Done()
			_, _ = io.Copy(dst, r)
			r.Close()
		}()
	}
	if st.Termios != nil {
		pass = append(pass, int(w.termFile.Fd()))
	}
	if fd := s.cont.fd(); fd >= 0 {
		// The guardian starts the work inside the run's cgroup, through a
		// descriptor of its own of the directory.
		pass = append(pass, fd)
		st.Cgroup = s.cont.Cgroup
	}
	<-g.warmed
	err := g.c.sendFiles(guardMsg{Op: opStart, Start: st}, pass)
	w.started()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrGuardian, err)
	}
	return nil
}

// close tells the guardian the lease is given back. The work is gone by
// then and the guardian exits by itself; it is waited for only when it
// has streams of the work's to copy to the end (a reader or writer that is
// not a file), or when the work did not end (the guardian died). A
// guardian that was never begun is let go.
func (g *guard) close() {
	if g.released {
		return
	}
	g.released = true
	if !g.begun {
		g.abandon()
		return
	}
	_ = g.c.send(guardMsg{Op: opDone})
	g.c.shut()
	if g.stdinW != nil {
		defer g.stdinW.Close() // the work is gone: nothing more is read
	}
	copied := make(chan struct{})
	go func() { g.copies.Wait(); close(copied) }()
	select {
	case <-copied:
		return // every stream a file, or all copied
	case <-g.gone:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(g.pid, syscall.SIGKILL)
		<-g.gone
	}
	// The guardian is gone: what is left to copy must not outlast it by
	// more than a second (exec.Cmd's WaitDelay, as it was).
	select {
	case <-copied:
	case <-time.After(time.Second):
	}
}

// outcome is how one run of the work under the guardian ended.
type outcome struct {
	status   int    // the work's own status
	why      string // whyDeadline, whyStopped or ""
	lost     error  // the lease's loss, if any
	sig      os.Signal
	timedOut bool  // a phase's timeout stopped it
	startErr error // it could not be started
	broken   error // the guardian died
}

// await follows the work until the guardian reports it gone: it forwards
// renewals, signals and losses, applies timeout (a phase's), and does job
// control. Signals: the first is passed to the work and, after the kill
// grace, SIGKILL follows; a second kills at once.
func (s *session) await(ctx context.Context, g *guard, timeout <-chan time.Time, w *workIO) outcome {
	var (
		out         outcome
		lost        = s.hold.Done()
		done        = ctx.Done()
		killAt      <-chan time.Time
		killT       *time.Timer
		noticeAt    <-chan time.Time // the work outlives a signal: say what pool-run waits for
		signalled   time.Time
		tstp        = s.tstp
		suspending  <-chan time.Time // Ctrl-Z: waiting for the work to be stopped
		reconfirm   <-chan time.Time // a renewal after a stop to try again
		unconfirmed <-chan time.Time // a loss the guardian has not confirmed
	)
	defer func() {
		if killT != nil {
			killT.Stop()
		}
	}()
	interrupt := func(sig os.Signal) {
		if out.sig != nil {
			_ = g.c.send(guardMsg{Op: opKill}) // a second one: at once
			return
		}
		out.sig = sig
		n, ok := sig.(syscall.Signal)
		if !ok {
			n = syscall.SIGTERM
		}
		_ = g.c.send(guardMsg{Op: opSignal, Sig: int(n)})
		killT = time.NewTimer(s.o.KillGrace)
		killAt = killT.C
		signalled = time.Now()
		noticeAt = time.After(min(graceNotice, s.o.KillGrace/2))
	}
	confirm := func() {
		if !s.confirm(ctx, g, &out) {
			reconfirm = time.After(s.hold.Interval())
		}
	}
	stopSelf := func() {
		suspending = nil
		if w != nil && w.link != nil {
			w.link.restore()
		}
		// SIGSTOP, not SIGTSTP: once notified, the Go runtime keeps its
		// handler for SIGTSTP and drops the signal; the shell sees the
		// job stopped either way. Kill returns once pool-run is continued.
		s.stopSelf()
		if w != nil && w.link != nil {
			// In the terminal's background this stops pool-run again
			// (SIGTTOU), before the work can run, until it is in the
			// foreground.
			w.link.makeRaw()
		}
		confirm()
	}
	for {
		select {
		case m, ok := <-g.msgs:
			if !ok {
				g.msgs = nil
				<-g.gone
				// Nobody guards the lease's deadline for the work any
				// more: no grace, and it is gone before the release.
				ended := s.endWithoutGuardian(ctx, g)
				if out.lost != nil {
					// The loss is what the run ends with; the guardian,
					// which did not confirm it, is gone too.
					fmt.Fprintf(s.o.Log, "pool-run: the guardian (pid %d) ended (%v); %s\n", g.pid, g.err, ended)
					return out
				}
				out.broken = fmt.Errorf("the guardian (pid %d) ended: %v; %s", g.pid, g.err, ended)
				return out
			}
			switch m.Op {
			case opStarted:
				g.work = m.Pid
			case opExited:
				out.status, out.why = m.Status, m.Why
				if m.Left > 0 {
					fmt.Fprintf(s.o.Log, "pool-run: the work left %d process(es) running; they were ended before the release\n", m.Left)
				}
				if m.Escaped > 0 {
					fmt.Fprintf(s.o.Log, "pool-run: %d process(es) of the work left its cgroup %s for another; they were found below the guardian and ended\n", m.Escaped, s.cont.Cgroup)
				}
				if out.lost == nil {
					out.lost = s.lost()
				}
				if out.lost == nil && s.cont.endedByOther() {
					out.lost = endedError(s.held, nil)
					fmt.Fprintf(s.o.Log, "pool-run: lost %s: %v\n", s.held, out.lost)
				}
				return out
			case opFailed:
				if s.cont.endedByOther() {
					// Its cgroup was removed by whoever took the lease.
					out.lost = endedError(s.held, nil)
				} else if m.Internal {
					out.broken = fmt.Errorf("%w: %s", ErrGuardian, m.Why)
				} else {
					out.startErr = fmt.Errorf("%w: %s", ErrStart, m.Why)
				}
				return out
			case opConfirm:
				confirm()
			case opSuspended:
				if suspending != nil {
					stopSelf()
				}
			}
		case <-s.renewals.ch:
			_ = g.c.send(guardMsg{Op: opUntil, Until: s.renewals.until.Load()})
		case <-lost:
			lost, out.lost = nil, s.hold.Err()
			// The lease may be someone else's already: nothing of the
			// work may run on, not even for a grace. The cgroup is killed
			// here and now; the guardian is told too, and if it does not
			// confirm in time (stopped, starved), pool-run ends the tree
			// below it itself.
			s.cont.kill()
			_ = g.c.send(guardMsg{Op: opKill})
			unconfirmed = time.After(lossBound)
			fmt.Fprintf(s.o.Log, "pool-run: lost %s: %v; killing the work\n", s.held, out.lost)
		case <-unconfirmed:
			unconfirmed = nil
			fmt.Fprintf(s.o.Log, "pool-run: the guardian (pid %d) did not confirm the kill within %s; %s\n", g.pid, lossBound, s.endWithoutGuardian(ctx, g))
		case sig := <-s.o.Signals:
			interrupt(sig)
		case <-done:
			done = nil
			interrupt(syscall.SIGTERM)
		case <-timeout:
			timeout = nil
			out.timedOut = true
			_ = g.c.send(guardMsg{Op: opStop, Grace: int64(s.o.KillGrace)})
		case <-noticeAt:
			noticeAt = nil
			if killAt != nil {
				left := (s.o.KillGrace - time.Since(signalled)).Round(100 * time.Millisecond)
				fmt.Fprintf(s.o.Log, "pool-run: the work has not exited after %s; waiting up to %s more for it before SIGKILL (Ctrl-C again kills it now)\n",
					signalName(out.sig), left)
			}
		case <-killAt:
			killAt = nil
			_ = g.c.send(guardMsg{Op: opKill})
		case <-tstp:
			if suspending == nil {
				_ = g.c.send(guardMsg{Op: opSuspend})
				suspending = time.After(time.Second)
			}
		case <-suspending:
			stopSelf() // the guardian did not answer in time: stop all the same
		case <-reconfirm:
			reconfirm = nil
			confirm()
		}
	}
}

// lossBound is how long pool-run waits for the guardian to confirm that
// the work is gone after a loss before ending it itself: a guardian that
// runs kills within milliseconds, so one that has not is stopped,
// starved or hung.
const lossBound = 250 * time.Millisecond

// endWithoutGuardian ends the work without its guardian (dead, or not
// answering): the cgroup at once; without one, the guardian's tree (the
// guardian too, since it does not answer), the work's process group, and
// the orphans that come to pool-run, the subreaper above the guardian.
// It returns what was done, for a message.
func (s *session) endWithoutGuardian(ctx context.Context, g *guard) string {
	if s.cont.cg != nil {
		// The cgroup first, at once; then the guardian itself, which does
		// not answer, and what of the work left the cgroup below it.
		err := s.cont.end()
		killTree(g.pid)
		reapOrphans()
		if err != nil {
			return "ending the work's cgroup: " + err.Error()
		}
		return "the work's cgroup was killed"
	}
	killTree(g.pid)
	if g.work > 0 {
		_ = procgroup.Stop(context.WithoutCancel(ctx), 0, procgroup.New(g.work))
	}
	reapOrphans()
	return "the work's process tree was killed"
}

// graceNotice is how long the work may take to exit after a signal
// before pool-run says, once, that it waits for the kill grace: a work
// that exits at once gets no line, one that ignores the signal is not
// left looking like a hang.
const graceNotice = 500 * time.Millisecond

// signalName names a signal the way a shell user knows it.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return sig.String()
}

// confirm renews the lease after pool-run was stopped and lets the work
// go on only if the renewal was confirmed. It reports false for a renewal
// that neither succeeded nor lost the lease: the work stays stopped, to
// be confirmed again or killed by the guardian's deadline.
func (s *session) confirm(ctx context.Context, g *guard, out *outcome) bool {
	err := s.hold.Renew(ctx)
	switch {
	case err == nil:
		_ = g.c.send(guardMsg{Op: opResume, Until: s.renewals.until.Load()})
	case errors.Is(err, lease.ErrLost):
		out.lost = err
		_ = g.c.send(guardMsg{Op: opKill})
		fmt.Fprintf(s.o.Log, "pool-run: lost %s while stopped: %v; killing the work\n", s.held, err)
	default:
		fmt.Fprintf(s.o.Log, "pool-run: could not confirm %s after a stop (%v); the work stays stopped\n", s.held, err)
		return false
	}
	return true
}
