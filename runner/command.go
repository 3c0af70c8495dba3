package runner

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// Command holds what o names while argv runs, and returns how it ended.
//
// argv[0] is looked up in the PATH of o.Env and run directly, with no
// shell, before anything is acquired: a missing program ends the run with
// 127 (126 when it cannot be executed) and takes no slot. The command gets
// the grant's environment plus POOL_RUN_SLOT (POOL_RUN_KIND for a baton),
// POOL_RUN_TOKEN, POOL_RUN_OWNER and POOL_RUN_FENCE.
//
// The result's Exit is the command's own status (128+n when it died of
// signal n); ExitLost when the lease was lost, after the command's group
// got SIGTERM and, if still running o.KillGrace later, SIGKILL; 128+n when
// signal n arrived on o.Signals (it is forwarded to the group, and SIGKILL
// follows after the grace); or the acquisition's status (1, 2 or 3) when
// nothing was obtained. Cancelling ctx acts as SIGTERM on o.Signals does.
// Every path that acquired releases exactly once.
func Command(ctx context.Context, o Options, argv []string) *Result {
	if err := o.check(); err != nil {
		return &Result{Exit: ExitUsage, Code: CodeUsage, Err: err}
	}
	if len(argv) == 0 {
		return &Result{Exit: ExitUsage, Code: CodeUsage, Err: fmt.Errorf("%w: no command to run", ErrInvalid)}
	}
	path, status, err := lookPath(argv[0], o.Dir, o.Env)
	if err != nil {
		return &Result{Exit: status, Code: codeOfStart(status), Err: err}
	}
	if err := checkDescriptors(); err != nil {
		return &Result{Exit: ExitInternal, Code: CodeInternal, Err: err}
	}
	// The guardian starts now, while the lease is acquired; it gets what
	// it needs to run the work once the lease is held.
	g, err := o.spawnGuardian()
	if err != nil {
		return &Result{Exit: ExitInternal, Code: CodeInternal, Err: err}
	}
	defer g.abandon()
	s, res := acquire(ctx, &o)
	if res != nil {
		return res
	}
	// A signal that arrived as the acquisition ended must not start the
	// command only to stop it.
	select {
	case sig := <-o.Signals:
		return s.finish(&Result{Exit: signalStatus(sig), Code: CodeInterrupted, Signal: sig, Err: &interruption{sig}})
	default:
	}
	defer s.jobControl()()
	w, err := wireStdio(&o, false)
	if err != nil {
		// The run's own failure (a pseudo-terminal), not the command's.
		return s.finish(&Result{Exit: ExitInternal, Code: CodeInternal, Err: fmt.Errorf("%w: %v", ErrGuardian, limitHint(err))})
	}
	if err := s.begin(g, w, &guardStart{Path: path, Argv: argv, Env: s.env, Dir: o.Dir, Ctty: w.ctty}); err != nil {
		g.close()
		w.finish(0)
		return s.finish(&Result{Exit: ExitInternal, Code: CodeInternal, Err: err})
	}
	if w.saved != nil {
		// The terminal is raw while the work runs: pool-run's own lines
		// need their carriage returns.
		s.o.Log = crlf{s.o.Log}
	}
	out := s.await(ctx, g, nil, w)
	return s.finishWith(g, w, out.result(s))
}

func codeOfStart(status int) string {
	if status == ExitNotFound {
		return CodeNotFound
	}
	return CodeNotExecutable
}

// result turns how the work ended into the run's result: a loss, or a
// deadline the guardian had to enforce, comes before a signal, which comes
// before the work's own status.
func (out *outcome) result(s *session) *Result {
	switch {
	case out.broken != nil:
		return &Result{Exit: ExitInternal, Code: CodeInternal, Err: out.broken}
	case out.startErr != nil:
		return &Result{Exit: ExitNotExecutable, Code: CodeNotExecutable, Err: out.startErr}
	case out.lost != nil:
		return &Result{Exit: ExitLost, Code: CodeLost, Err: out.lost}
	case out.why == whyTerminated:
		return &Result{Exit: signalStatus(syscall.SIGTERM), Code: CodeInterrupted, Signal: syscall.SIGTERM,
			Err: fmt.Errorf("the guardian was sent SIGTERM: %w", &interruption{syscall.SIGTERM})}
	case out.why == whyDeadline:
		why := "no renewal was confirmed in time: pool-run stopped or hung, or the store did not answer"
		if f := s.hold.Failing(); f != nil {
			why = "the store did not confirm a renewal: " + f.Error()
		}
		err := fmt.Errorf("%w: %s was not renewed in time (%s); the guardian killed the work before the lease could expire", lease.ErrLost, s.held, why)
		return &Result{Exit: ExitLost, Code: CodeLost, Err: err}
	case out.sig != nil:
		return &Result{Exit: signalStatus(out.sig), Code: CodeInterrupted, Signal: out.sig, Err: &interruption{out.sig}}
	}
	code := CodeOK
	if out.status != 0 {
		code = CodeFailed
	}
	return &Result{Exit: out.status, Code: code}
}

// finishWith releases the lease (the work is gone by now), lets the
// guardian go, and gives the terminal back.
func (s *session) finishWith(g *guard, w *workIO, r *Result) *Result {
	r = s.finish(r)
	g.close()
	w.finish(max(s.o.KillGrace, time.Second))
	return r
}

// result fills in what was held and for how long.
func (s *session) result(r *Result) *Result {
	r.Held, r.HeldFor = s.held, time.Since(s.start)
	if s.cont != nil {
		c := s.cont.Containment
		r.Containment = &c
	}
	return r
}
