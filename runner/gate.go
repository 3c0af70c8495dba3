package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/gates"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// Phase results, as the summary shows them.
const (
	PhasePassed      = "passed"
	PhaseFailed      = CodeFailed
	PhaseTimeout     = CodeTimeout
	PhaseLost        = CodeLost
	PhaseInterrupted = CodeInterrupted
	PhaseResetFailed = "reset_failed"
	PhaseSkipped     = "skipped"
)

// PhaseResult is how one gate phase ended.
type PhaseResult struct {
	Name     string
	Result   string
	Exit     int
	Reset    bool // the slot was reset before the phase
	Duration time.Duration
	Err      error
}

// Gate holds what o names while the phases of g run in order, each as
// shell text in the mvdan.cc/sh interpreter in g's directory, with the
// grant's environment plus g's env. Before a phase with Reset the pool's
// reset and health commands run on the held slot. The first phase that
// fails stops the gate with its status; a phase past its timeout ends with
// ExitTimeout; a loss stops it with ExitLost, a signal with 128+n. A phase
// runs with stdin from /dev/null when stdin is a terminal: its programs
// run in process groups of their own, and one reading the terminal would
// be stopped.
func Gate(ctx context.Context, o Options, g *gates.Gate) *Result {
	if err := o.check(); err != nil {
		return &Result{Exit: ExitUsage, Code: CodeUsage, Err: err}
	}
	if len(g.Phases) == 0 {
		return &Result{Exit: ExitUsage, Code: CodeUsage, Err: fmt.Errorf("%w: a gate needs phases", ErrInvalid)}
	}
	if err := checkGateEnv(&o, g); err != nil {
		return &Result{Exit: 2, Code: "usage", Err: err, Phases: skipped(g.Phases, 0)}
	}
	if err := checkDescriptors(); err != nil {
		return &Result{Exit: ExitInternal, Code: CodeInternal, Err: err, Phases: skipped(g.Phases, 0)}
	}
	// The guardian starts now, while the slot is acquired and provisioned.
	gd, err := o.spawnGuardian()
	if err != nil {
		return &Result{Exit: ExitInternal, Code: CodeInternal, Err: err, Phases: skipped(g.Phases, 0)}
	}
	defer gd.abandon()
	s, res := acquire(ctx, &o)
	if res != nil {
		res.Phases = skipped(g.Phases, 0)
		return res
	}
	return s.runPhases(ctx, g, gd)
}

// checkGateEnv expands g's env as it would be for each slot the run could
// be granted (or for the baton) before anything is acquired, so that a
// reference no grant defines is refused at once, not after a slot was
// taken and provisioned. The variables pool-run adds for the lease stand
// in with empty values.
func checkGateEnv(o *Options, g *gates.Gate) error {
	lease := map[string]string{"POOL_RUN_TOKEN": "", "POOL_RUN_OWNER": "", "POOL_RUN_FENCE": "", "LEASE_STORE": "", EnvHeld: ""}
	if o.Pool == nil {
		lease["POOL_RUN_KIND"] = ""
		_, err := g.Expand(envLookup(workEnv(o.Env, nil, lease)))
		return err
	}
	lease["POOL_RUN_SLOT"] = ""
	cfg := o.Pool.Config()
	for _, slot := range cfg.Slots {
		grant, err := cfg.WorkEnv(slot)
		if err != nil {
			return err
		}
		if _, err := g.Expand(envLookup(workEnv(o.Env, grant, lease))); err != nil {
			return fmt.Errorf("for slot %s of pool %s: %w", slot.ID, cfg.Name, err)
		}
	}
	return nil
}

// envLookup finds a variable in env, the last of a name winning.
func envLookup(env []string) func(name string) (string, bool) {
	return func(name string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], name+"="); ok {
				return v, true
			}
		}
		return "", false
	}
}

func skipped(phases []gates.Phase, from int) []PhaseResult {
	var out []PhaseResult
	for _, p := range phases[from:] {
		out = append(out, PhaseResult{Name: p.Name, Result: PhaseSkipped, Reset: false})
	}
	return out
}

func (s *session) runPhases(ctx context.Context, g *gates.Gate, gd *guard) *Result {
	extra, err := g.Expand(envLookup(s.env))
	if err != nil {
		return s.finish(&Result{Exit: ExitUsage, Code: CodeUsage, Err: err, Phases: skipped(g.Phases, 0)})
	}
	env := append(gitless(s.env), extra...)
	defer s.jobControl()()
	w, err := wireStdio(s.o, true)
	if err != nil {
		return s.finish(&Result{Exit: ExitInternal, Code: CodeInternal, Err: err, Phases: skipped(g.Phases, 0)})
	}
	if err := s.begin(gd, w, &guardStart{Phases: true, Ctty: -1}); err != nil {
		gd.close()
		w.finish(0)
		return s.finish(&Result{Exit: ExitInternal, Code: CodeInternal, Err: err, Phases: skipped(g.Phases, 0)})
	}
	r := s.phases(ctx, g, gd, w, env)
	r = s.finish(r)
	gd.close()
	w.finish(max(s.o.KillGrace, time.Second))
	return r
}

// phases runs the gate's phases one by one under the guardian.
func (s *session) phases(ctx context.Context, g *gates.Gate, gd *guard, w *workIO, env []string) *Result {
	var results []PhaseResult
	for i, ph := range g.Phases {
		pr := s.runPhase(ctx, gd, w, ph, g.Dir, env)
		results = append(results, pr)
		if pr.Result == PhasePassed {
			continue
		}
		results = append(results, skipped(g.Phases, i+1)...)
		if pr.Result == PhaseLost {
			fmt.Fprintf(s.o.Log, "pool-run: lost %s: %v; stopped the gate\n", s.held, pr.Err)
		}
		r := &Result{Exit: pr.Exit, Code: pr.Result, Err: pr.Err, Phases: results}
		switch pr.Result {
		case PhaseFailed:
			r.Err = nil
		case PhaseInterrupted:
			var in *interruption
			if errors.As(pr.Err, &in) {
				r.Signal = in.sig
			}
		}
		return r
	}
	if err := s.lost(); err != nil {
		return &Result{Exit: ExitLost, Code: PhaseLost, Err: err, Phases: results}
	}
	return &Result{Exit: 0, Code: CodeOK, Phases: results}
}

// runPhase resets the slot if the phase asks for it, then has the
// guardian run the phase, and waits for it and everything it started.
func (s *session) runPhase(ctx context.Context, gd *guard, w *workIO, ph gates.Phase, dir string, env []string) PhaseResult {
	start := time.Now()
	pr := PhaseResult{Name: ph.Name}
	end := func(result string, exit int, err error) PhaseResult {
		pr.Result, pr.Exit, pr.Err, pr.Duration = result, exit, err, time.Since(start)
		return pr
	}
	if err := s.lost(); err != nil {
		return end(PhaseLost, ExitLost, err)
	}
	if ph.Reset && s.o.Pool != nil {
		pr.Reset = true
		fmt.Fprintf(s.o.Log, "pool-run: phase %s: resetting %s\n", ph.Name, s.held)
		var err error
		cause := s.during(ctx, func(rctx context.Context) {
			rctx, done := s.cont.withCgroup(rctx)
			defer done()
			_, err = s.o.Pool.Reset(rctx, s.held.Slot, s.held.Owner, s.held.Token)
		})
		if ended := endedBy(cause); ended != nil {
			return end(ended.result, ended.exit, ended.err)
		}
		if err != nil {
			result, exit, err := resetFailure(err)
			return end(result, exit, err)
		}
	}
	fmt.Fprintf(s.o.Log, "pool-run: phase %s\n", ph.Name)
	// The deadline goes with the phase: renewals during the reset were
	// not passed on (the guardian had nothing to guard).
	if err := gd.c.send(guardMsg{Op: opPhase, Until: s.renewals.until.Load(), Phase: &guardPhase{Script: ph.Run, Dir: dir, Env: env, Grace: int64(s.o.KillGrace)}}); err != nil {
		return end(PhaseFailed, 3, fmt.Errorf("the guardian: %w", err))
	}
	var timeout <-chan time.Time
	if ph.Timeout > 0 {
		t := time.NewTimer(ph.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	out := s.await(ctx, gd, timeout, w)
	switch r := out.result(s); {
	case r.Code == CodeLost:
		return end(PhaseLost, ExitLost, r.Err)
	case r.Code == CodeInterrupted:
		return end(PhaseInterrupted, r.Exit, r.Err)
	case out.timedOut:
		return end(PhaseTimeout, ExitTimeout, &phaseTimeout{ph.Name, ph.Timeout})
	case r.Code == CodeOK:
		return end(PhasePassed, 0, nil)
	case r.Code == CodeFailed:
		return end(PhaseFailed, r.Exit, fmt.Errorf("phase %s: exit status %d", ph.Name, r.Exit))
	default:
		fmt.Fprintf(s.o.Log, "pool-run: phase %s: %v\n", ph.Name, r.Err)
		return end(PhaseFailed, r.Exit, r.Err)
	}
}

// during runs fn (a reset, in pool-run itself) with a context that a
// loss, a signal or ctx cancels, and returns what cancelled it, if
// anything did.
func (s *session) during(ctx context.Context, fn func(context.Context)) error {
	rctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	quit := make(chan struct{})
	watched := make(chan struct{})
	stopAfter := false // Ctrl-Z during the reset
	go func() {
		defer close(watched)
		for {
			select {
			case <-s.hold.Done():
				stop(s.hold.Err())
			case got := <-s.o.Signals:
				stop(&interruption{got})
			case <-s.tstp:
				stopAfter = true
				continue
			case <-rctx.Done():
			case <-quit:
			}
			return
		}
	}()
	fn(rctx)
	close(quit)
	<-watched
	if stopAfter {
		// No work runs between phases; the reset is done, so no store
		// update is cut in two by the stop. The next phase's await
		// renews nothing by itself: renew here, once continued.
		s.stopSelf()
		if err := s.hold.Renew(ctx); errors.Is(err, lease.ErrLost) {
			return err
		}
	}
	return context.Cause(rctx)
}

// hookGitVars are what git exports to a hook run in a linked worktree.
// Left set, every git command of a phase (which runs in the gate file's
// directory, inside the worktree) would take that directory for the top of
// the worktree; without them git finds the repository as usual.
var hookGitVars = []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_PREFIX", "GIT_INDEX_FILE"}

// gitless is env without hookGitVars.
func gitless(env []string) []string {
	out := make([]string, 0, len(env))
next:
	for _, kv := range env {
		for _, name := range hookGitVars {
			if strings.HasPrefix(kv, name+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

type ending struct {
	result string
	exit   int
	err    error
}

// endedBy says why a reset was cut short, if it was.
func endedBy(cause error) *ending {
	switch {
	case cause == nil:
		return nil
	case errors.Is(cause, lease.ErrLost):
		return &ending{PhaseLost, ExitLost, cause}
	}
	var in *interruption
	if errors.As(cause, &in) {
		return &ending{PhaseInterrupted, signalStatus(in.sig), cause}
	}
	return &ending{PhaseInterrupted, signalStatus(syscall.SIGTERM), &interruption{syscall.SIGTERM}}
}

// resetFailure is how a phase whose reset failed with err ends: lost when
// the reset found the lease gone, else the pool's verdict on the slot
// (reset_failed or health_failed, a refusal), else a failure of the store.
func resetFailure(err error) (result string, exit int, _ error) {
	var se *pool.SlotError
	switch {
	case errors.Is(err, pool.ErrLeaseLost), errors.Is(err, lease.ErrNotHeld),
		errors.Is(err, lease.ErrNotOwner), errors.Is(err, lease.ErrExpired):
		return PhaseLost, ExitLost, lostError{err}
	case errors.As(err, &se) && se.State == pool.GrantHealthFailed:
		return CodeHealthFailed, ExitRefused, err
	case errors.As(err, &se):
		return PhaseResetFailed, ExitRefused, err
	}
	return PhaseResetFailed, ExitInternal, err
}

// lostError is a loss seen through another error (a reset that found the
// lease gone): it matches ErrLost, and reads as that error.
type lostError struct{ err error }

func (e lostError) Error() string        { return e.err.Error() }
func (e lostError) Unwrap() error        { return e.err }
func (e lostError) Is(target error) bool { return target == ErrLost }

// phaseTimeout is a phase that ran out of its timeout; it matches
// ErrPhaseTimeout.
type phaseTimeout struct {
	name    string
	timeout time.Duration
}

func (e *phaseTimeout) Error() string {
	return fmt.Sprintf("phase %s ran out of its %s", e.name, e.timeout)
}
func (e *phaseTimeout) Is(target error) bool { return target == ErrPhaseTimeout }

// interruption is a run ended by a signal; it matches ErrInterrupted.
type interruption struct{ sig os.Signal }

func (e *interruption) Error() string {
	if n, ok := e.sig.(syscall.Signal); ok && unix.SignalName(n) != "" {
		return fmt.Sprintf("%v by %s", ErrInterrupted, unix.SignalName(n))
	}
	return fmt.Sprintf("%v by %v", ErrInterrupted, e.sig)
}
func (e *interruption) Is(target error) bool { return target == ErrInterrupted }
