package runner

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"
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
		return &Result{Exit: 2, Code: "usage", Err: err}
	}
	if len(argv) == 0 {
		return &Result{Exit: 2, Code: "usage", Err: fmt.Errorf("%w: no command to run", ErrInvalid)}
	}
	path, status, err := lookPath(argv[0], o.Dir, o.Env)
	if err != nil {
		return &Result{Exit: status, Code: codeOfStart(status), Err: err}
	}
	s, res := acquire(ctx, &o)
	if res != nil {
		return res
	}
	// A signal that arrived as the acquisition ended must not start the
	// command only to stop it.
	select {
	case sig := <-o.Signals:
		return s.finish(&Result{Exit: signalStatus(sig), Code: "interrupted", Signal: sig, Err: &interruption{sig}})
	default:
	}
	c, err := startChild(&o, path, argv, s.env, usePty(&o))
	if err != nil {
		return s.finish(&Result{Exit: ExitNotExecutable, Code: "not_executable", Err: err})
	}
	return s.finish(s.supervise(ctx, c))
}

func codeOfStart(status int) string {
	if status == ExitNotFound {
		return "not_found"
	}
	return "not_executable"
}

// supervise waits for the child while watching the lease, the signals and
// ctx, and stops the child's whole group when the lease is lost or a
// signal asks for it.
func (s *session) supervise(ctx context.Context, c *child) *Result {
	grace := s.o.KillGrace
	var (
		lostErr error
		sig     os.Signal
		killAt  <-chan time.Time
		lost    = s.hold.Done()
		done    = ctx.Done()
	)
	var (
		killTimer *time.Timer
		deadline  time.Time // SIGKILL time, once a stop has begun
	)
	escalate := func() {
		if killTimer == nil {
			deadline = time.Now().Add(grace)
			killTimer = time.NewTimer(grace)
			killAt = killTimer.C
		}
	}
	defer func() {
		if killTimer != nil {
			killTimer.Stop()
		}
	}()
	for running := true; running; {
		select {
		case <-c.exited:
			running = false
		case <-lost:
			lost, lostErr = nil, s.hold.Err()
			c.signal(syscall.SIGTERM) // before anything that could block
			escalate()
			fmt.Fprintf(s.o.Log, "pool-run: lost %s: %v; stopping the command\n", s.held, lostErr)
		case got := <-s.o.Signals:
			if sig == nil {
				sig = got
			}
			if n, ok := got.(syscall.Signal); ok {
				c.signal(n)
			}
			escalate()
		case <-done:
			done = nil
			if sig == nil {
				sig = syscall.SIGTERM
			}
			c.signal(syscall.SIGTERM)
			escalate()
		case <-killAt:
			killAt = nil
			c.signal(syscall.SIGKILL)
		}
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(grace)
	}
	c.finish(deadline)
	if lostErr == nil {
		lostErr = s.lost()
	}
	switch {
	case lostErr != nil:
		return &Result{Exit: ExitLost, Code: "lease_lost", Err: lostErr}
	case sig != nil:
		return &Result{Exit: signalStatus(sig), Code: "interrupted", Signal: sig, Err: &interruption{sig}}
	}
	st := c.status()
	code := "ok"
	if st != 0 {
		code = "failed"
	}
	return &Result{Exit: st, Code: code}
}

// result fills in what was held and for how long.
func (s *session) result(r *Result) *Result {
	r.Held, r.HeldFor = s.held, time.Since(s.start)
	return r
}
