package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

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
//
// A store that does not answer for a while ([ErrUnavailable]: an etcd
// cluster electing a leader, a remote restarting) is waited out like a
// holder: the attempt is made again at the next poll. A wait that ends
// while the store still does not answer returns that error.
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
	if errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
		return s.waitHead(ctx, r, start, nil)
	}
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
// holder's expiry and every poll interval, and at the next poll after an
// attempt the store did not answer. held is the refusal seen last, if
// any.
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
		if errors.Is(err, ErrWorkRunning) {
			// The previous holder's work runs on where this user cannot
			// end it: as for a live holder, a waiter waits on.
			if st, serr := s.Status(ctx, r.Kind); serr == nil && st.Record != nil {
				held = &HeldError{Record: st.Record, ExpiresAt: time.Now().Add(s.opts.pollInterval)}
				err = held
			}
		}
		var unavailable error
		switch {
		case errors.As(err, &held):
		case errors.Is(err, ErrUnavailable) && ctx.Err() == nil:
			unavailable = err // nothing changed: wait on, and try again
		default:
			return acquired(acq, err)
		}
		next := s.opts.pollInterval
		if until := time.Until(held.expiresAt()) + time.Millisecond; unavailable == nil && until > 0 && until < next {
			next = until
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			if unavailable != nil || held == nil {
				return nil, cmp.Or(unavailable, ctx.Err())
			}
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
