package lease

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// A WaitLiner is a [Backend] that can line up the waiters of a kind, so
// that a release wakes one waiter instead of all of them (a herd racing
// for the record, which made a hand-off with 50 waiters take up to
// seconds). It is optional: [Store.AcquireWait] uses it when the backend
// has it.
//
// LineUp joins the line of kind's waiters, for at most as long as ctx
// (a backend may also tie the place to it, or ignore it). An error means
// the line cannot be used: the caller then waits without it, as every waiter on a backend
// without a line does. The line only orders waiters: it never decides who
// holds the lease (the head still has to acquire it like anyone else), so
// a line that fails, or two waiters that both believe they are the head,
// can cost time but never exclusivity.
type WaitLiner interface {
	LineUp(ctx context.Context, kind string) (Place, error)
}

// A Place is a waiter's place in a kind's line (see [WaitLiner]).
type Place struct {
	// Turn delivers nil once the waiter is at the head of the line, or an
	// error: the line became unusable, and the waiter goes on without it.
	Turn <-chan error
	// Leave gives the place or the turn back. It may be called at any
	// time, and more than once.
	Leave func()
	// Recheck is how often a waiter behind the head reads the record
	// itself, in case the head has stopped without leaving (0: every
	// lineCheckFactor poll intervals). A line whose places lapse by
	// themselves when their waiter stops (etcd: a key bound to the
	// waiter's own etcd lease) needs the net only as a last resort and
	// sets it long, so that idle waiters cost nothing.
	Recheck time.Duration
}

// lineCheckFactor: a waiter behind the head of the line reads the record
// (without the guard) every lineCheckFactor poll intervals (give or take
// half), and races for the lease like any other process when it has found
// it free on two checks in a row: the head may be stopped, or slow, and
// the line must never keep a free lease from every waiter. It is a net
// for a rare failure, so it is wide: with the default poll, a check every
// 5 s on average, and a head stopped with the lease free holds the line up
// for about 10 s. Every 4 polls, 200 idle waiters read the record 200
// times a second, 0.06 cores here.
const lineCheckFactor = 20

// AcquireWait acquires like [Store.Acquire], but while the lease is held it
// waits and tries again: on a change to the record reported by the backend
// (a release is seen within milliseconds), at the holder's expiry, and at
// least every poll interval. It stops when ctx is done: a deadline ends it
// with a [*HeldError] matching ErrTimeout, a cancellation with ctx's error.
//
// On a backend that lines waiters up (a [WaitLiner]: the file store's
// flock(2) on the kind's wait file, etcd's places under P/wait/<kind>/),
// only the head of the line watches and retries; the others wait their
// turn, so one release wakes one waiter. Processes that do not use the
// line (the Node tool) are ordinary racers.
func (s *Store) AcquireWait(ctx context.Context, r Request) (*Acquisition, error) {
	if err := s.checkRequest(r); err != nil {
		return nil, err
	}
	start := time.Now()
	liner, ok := s.b.(WaitLiner)
	if !ok {
		return s.waitHead(ctx, r, start, nil)
	}
	// A free lease is taken at once, without touching the line, so only a
	// waiter that has to wait creates the wait file.
	acq, err := s.Acquire(ctx, r)
	var held *HeldError
	if !errors.As(err, &held) {
		return acquired(acq, err)
	}
	place, err := liner.LineUp(ctx, r.Kind)
	if err != nil {
		return s.waitHead(ctx, r, start, held)
	}
	defer place.Leave()
	check := max(lineCheckFactor*s.opts.pollInterval, time.Millisecond)
	if place.Recheck > 0 {
		check = place.Recheck
	}
	timer := time.NewTimer(check/2 + rand.N(check))
	defer timer.Stop()
	freeSeen := false
	for {
		select {
		case err := <-place.Turn:
			_ = err // with or without the line, the head waits the same way
			return s.waitHead(ctx, r, start, held)
		case <-ctx.Done():
			return nil, waitEnded(ctx, held, start)
		case <-timer.C:
		}
		// The safety net behind the head.
		timer.Reset(check/2 + rand.N(check))
		st, err := s.Status(ctx, r.Kind)
		if err != nil || st.State == Held {
			if err == nil && st.Record != nil {
				held = &HeldError{Record: st.Record, ExpiresAt: st.Record.ExpiresAt()}
			}
			freeSeen = false
			continue
		}
		if !freeSeen {
			freeSeen = true
			continue
		}
		freeSeen = false
		acq, err := s.Acquire(ctx, r)
		if !errors.As(err, &held) {
			return acquired(acq, err)
		}
	}
}

// waitHead is the wait of the head of the line (or of every waiter, on a
// backend without one): watch the record, retry on a change, at the
// holder's expiry and every poll interval. held is the refusal seen last,
// if any.
func (s *Store) waitHead(ctx context.Context, r Request, start time.Time, held *HeldError) (*Acquisition, error) {
	var wake <-chan struct{}
	if w, ok := s.b.(Watcher); ok {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// Watch before the next attempt, so a release between a refusal and
		// the wait still wakes us.
		if ch, err := w.Watch(wctx, r.Kind); err == nil {
			wake = ch
		}
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		acq, err := s.Acquire(ctx, r)
		if !errors.As(err, &held) {
			return acquired(acq, err)
		}
		next := s.opts.pollInterval
		if until := time.Until(held.ExpiresAt) + time.Millisecond; until > 0 && until < next {
			next = until
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return nil, waitEnded(ctx, held, start)
		case <-wake:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		}
	}
}

// acquired returns the outcome of an attempt that was not refused.
func acquired(acq *Acquisition, err error) (*Acquisition, error) {
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		// The deadline passed while entering the critical section.
		return nil, fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	return acq, err
}

// waitEnded is the error of a wait whose ctx is done: a timeout with the
// last refusal seen, or ctx's error.
func waitEnded(ctx context.Context, held *HeldError, start time.Time) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		held.Timeout, held.Waited = true, time.Since(start)
		return held
	}
	return ctx.Err()
}
