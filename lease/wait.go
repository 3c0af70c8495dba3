package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// AcquireWait acquires like [Store.Acquire], but while the lease is held it
// waits and tries again: on a change to the record reported by the backend
// (a release is seen within milliseconds), at the holder's expiry, and at
// least every poll interval. It stops when ctx is done: a deadline ends it
// with a [*HeldError] matching ErrTimeout, a cancellation with ctx's error.
func (s *Store) AcquireWait(ctx context.Context, r Request) (*Acquisition, error) {
	if err := s.checkRequest(r); err != nil {
		return nil, err
	}
	start := time.Now()
	var wake <-chan struct{}
	if w, ok := s.b.(Watcher); ok {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// Watch before the first attempt, so a release between a refusal and
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
		var held *HeldError
		if !errors.As(err, &held) {
			if errors.Is(err, context.DeadlineExceeded) {
				// The deadline passed while entering the critical section.
				return nil, fmt.Errorf("%w: %v", ErrTimeout, err)
			}
			return acq, err
		}
		next := s.opts.pollInterval
		if until := time.Until(held.ExpiresAt) + time.Millisecond; until > 0 && until < next {
			next = until
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				held.Timeout, held.Waited = true, time.Since(start)
				return nil, held
			}
			return nil, ctx.Err()
		case <-wake:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		}
	}
}
