package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrLost reports that a lease kept by a [Hold] is no longer the holder's:
// it expired before a heartbeat reached it, it was taken over or released
// by force, or two heartbeats in a row failed (other than with the store
// unavailable, which is tried again until the lease's deadline). Whatever
// the lease protects must stop being used at once.
var ErrLost = errors.New("lease: lost")

// Heartbeat bounds of a [Hold].
const (
	// MinBeatInterval is the shortest interval a Hold beats at: more often
	// would only contend for the guard.
	MinBeatInterval = 10 * time.Millisecond
	// maxRetryPause bounds the pause before the one retry of a failed
	// heartbeat: a transient failure (a busy guard, a full disk being
	// cleaned) gets a second chance soon, well inside any sane TTL.
	maxRetryPause = 5 * time.Second
)

// HoldOptions tune a [Hold]. The zero value chooses the defaults.
type HoldOptions struct {
	// Interval is the time between heartbeats. Zero means an eighth of the
	// TTL, so six beats can fail or be late before the lease lapses. It is
	// raised to MinBeatInterval.
	Interval time.Duration
	// RetryPause is the pause before a failed heartbeat is retried once.
	// Zero means half the interval, at most 5 s.
	RetryPause time.Duration
	// Release gives the lease back. Nil means [Store.Release] with the
	// hold's kind, owner and token; a pool passes its own, which also
	// keeps its statistics. An error matching ErrNotHeld, ErrNotOwner or
	// ErrExpired means the lease had been lost before the release: it was
	// gone, someone else's, or past its TTL.
	Release func(ctx context.Context) error
	// Acquired, when set, must be the record [Store.Acquire] has just
	// returned for this lease: it stands for Keep's first heartbeat,
	// saving one store write, if it carries the token and has not expired.
	Acquired *Record
	// Renewed, when set, is called after every confirmed heartbeat (and
	// once by Keep for the first one) with the time until which the lease
	// is safely the holder's: its confirmed expiry less the backend's
	// margin, the same deadline the Hold itself gives up at. A supervisor
	// outside this process uses it to stop the work in time if the
	// heartbeats stop. It runs on the heartbeat goroutine and must not
	// block.
	Renewed func(until time.Time)
}

// Hold keeps one held lease alive, in the spirit of etcd's
// concurrency.Session: a goroutine heartbeats it every interval, retries a
// failed heartbeat once after a short pause, and declares the lease lost on
// the second failure in a row, on a definite refusal (expired, not owner,
// no record) or when the last confirmed expiry passes without a successful
// heartbeat. A heartbeat that failed because the store could not be
// reached ([ErrUnavailable]: a cluster electing a leader, a remote
// restarting) proves nothing about the lease, which the store still keeps
// until its expiry: it is tried again, after the same pause, for as long as
// the deadline allows, and does not count towards the two failures. Loss
// closes [Hold.Done] and is reported by [Hold.Err].
//
// [Hold.Stop] stops heartbeating and leaves the lease to expire (or to be
// released by someone holding the token); [Hold.Release] stops and gives
// it back, exactly once. A Hold is safe for concurrent use.
type Hold struct {
	store              *Store
	kind, owner, token string
	interval, pause    time.Duration
	release            func(ctx context.Context) error
	renewed            func(until time.Time)
	renew              chan chan error // Renew's requests to the loop

	done    chan struct{} // closed on loss
	stop    chan struct{} // closed by Stop
	stopped chan struct{} // closed when the loop has ended

	mu       sync.Mutex
	rec      *Record
	err      error
	definite bool  // err is a refusal: the lease is certainly not ours
	failing  error // the last heartbeat's failure, nil once one succeeds

	beat sync.Mutex // held by each heartbeat, and by Pause

	stopOnce    sync.Once
	releaseOnce sync.Once
	releaseErr  error
}

// Keep starts keeping the lease on kind that owner holds with token. It
// heartbeats once before it returns (unless o.Acquired is the record just
// acquired), so a Hold never starts on a lease that is already gone: that
// first refusal is returned wrapped in ErrLost, any other failure as it is. Cancelling ctx stops the heartbeats as
// [Hold.Stop] does; it is not a loss.
func (s *Store) Keep(ctx context.Context, kind, owner, token string, o HoldOptions) (*Hold, error) {
	rec := o.Acquired
	if rec == nil || rec.Corrupt || rec.Kind != kind || rec.Owner != owner || rec.Token != token || !rec.Seen.Live {
		var err error
		if rec, err = s.Heartbeat(ctx, Ref{Kind: kind, Owner: owner, Token: token}); err != nil {
			if definiteLoss(err) {
				return nil, &lostError{err}
			}
			return nil, err
		}
	}
	h := &Hold{
		store: s, kind: kind, owner: owner, token: token, rec: rec,
		interval: o.Interval, pause: o.RetryPause, release: o.Release, renewed: o.Renewed,
		renew: make(chan chan error),
		done:  make(chan struct{}), stop: make(chan struct{}), stopped: make(chan struct{}),
	}
	if h.interval <= 0 {
		h.interval = rec.TTL() / 8
	}
	h.interval = max(h.interval, MinBeatInterval)
	if h.pause <= 0 {
		h.pause = min(h.interval/2, maxRetryPause)
	}
	if h.release == nil {
		h.release = func(ctx context.Context) error {
			r, err := s.Release(ctx, Ref{Kind: kind, Owner: owner, Token: token})
			if err != nil {
				return err
			}
			return ReleaseOutcome(kind, r.Released, r.WasExpired)
		}
	}
	if h.renewed != nil {
		h.renewed(time.Now().Add(h.untilExpiry()))
	}
	go h.loop(ctx)
	return h, nil
}

// Pause waits for a heartbeat in progress to end and holds the next one
// back until the returned function is called. A process about to stop
// itself (a shell job's Ctrl-Z) pauses first, so that it is not stopped
// in the middle of a store update, holding the kind's critical section
// for everyone else while it is stopped.
func (h *Hold) Pause() (resume func()) {
	h.beat.Lock()
	return h.beat.Unlock
}

// ErrHoldEnded is what [Hold.Renew] returns once the Hold has stopped
// beating (after Stop or Release, or the cancellation of Keep's context)
// without a loss.
var ErrHoldEnded = errors.New("lease: hold ended")

// Renew heartbeats now, in turn with the periodic heartbeats, and returns
// once the outcome is known: nil for a confirmed renewal, the loss
// (matching ErrLost) if the lease is or becomes lost, or ErrHoldEnded. A
// failure that the Hold would retry is returned as it is, and the Hold
// carries on as after any failed beat. A process that was stopped calls it
// when it is continued, to know the lease is still its own before its work
// runs again.
func (h *Hold) Renew(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case h.renew <- reply:
	case <-h.done:
		return h.Err()
	case <-h.stopped:
		return ErrHoldEnded
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ReleaseOutcome is the error a [HoldOptions.Release] returns for a
// release that found no record (ErrNotHeld) or an expired one (ErrExpired,
// though the record was removed), and nil for a clean one.
func ReleaseOutcome(kind string, released, wasExpired bool) error {
	switch {
	case !released:
		return fmt.Errorf("%w: %s had no record left to release", ErrNotHeld, kind)
	case wasExpired:
		return fmt.Errorf("%w: %s had expired before it was released", ErrExpired, kind)
	}
	return nil
}

// definiteLoss reports a heartbeat refusal that means the lease is gone,
// as opposed to a failure that a retry may get past.
func definiteLoss(err error) bool {
	return errors.Is(err, ErrExpired) || errors.Is(err, ErrNotOwner) || errors.Is(err, ErrNotHeld)
}

// Kind is the kept lease's kind.
func (h *Hold) Kind() string { return h.kind }

// Token is the kept lease's fencing token.
func (h *Hold) Token() string { return h.token }

// Interval is the time between heartbeats.
func (h *Hold) Interval() time.Duration { return h.interval }

// Record is the record as of the last successful heartbeat.
func (h *Hold) Record() *Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rec
}

// Failing is the error of the last heartbeat when it failed and none has
// succeeded since, else nil: why the renewals are late, for a supervisor
// that has to stop the work before the lease could lapse.
func (h *Hold) Failing() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failing
}

// Done is closed when the lease is lost. It is never closed by Stop,
// Release or the cancellation of Keep's context.
func (h *Hold) Done() <-chan struct{} { return h.done }

// Err is nil while the lease is held (and after a clean Stop or Release);
// once Done is closed it is the loss, wrapping ErrLost and its cause.
func (h *Hold) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Stop ends the heartbeats and waits for the heartbeat goroutine to finish.
// The lease stays as it is and expires after its TTL. It is idempotent.
func (h *Hold) Stop() {
	h.stopOnce.Do(func() { close(h.stop) })
	<-h.stopped
}

// Release stops the heartbeats and gives the lease back, once: later calls
// return the first call's result. After a loss the loss is returned (it
// matches ErrLost); a lease lost to a refusal is not touched, while one
// lost to failing heartbeats is still released with its token, since it
// may be ours yet.
func (h *Hold) Release(ctx context.Context) error {
	h.releaseOnce.Do(func() {
		h.Stop()
		h.mu.Lock()
		err, definite := h.err, h.definite
		h.mu.Unlock()
		if err != nil {
			if !definite {
				_ = h.release(ctx)
			}
			h.releaseErr = err
			return
		}
		h.releaseErr = h.release(ctx)
	})
	return h.releaseErr
}

func (h *Hold) loop(ctx context.Context) {
	defer close(h.stopped)
	beat := time.NewTimer(h.interval)
	defer beat.Stop()
	// deadline is when the lease is given up without a confirmed renewal.
	deadline := time.Now().Add(h.untilExpiry())
	expiry := time.NewTimer(time.Until(deadline))
	defer expiry.Stop()
	failures := 0
	for {
		var reply chan error // a Renew waiting for this beat
		select {
		case <-ctx.Done():
			return
		case <-h.stop:
			return
		case <-expiry.C:
			h.lose(h.expired(nil))
			return
		case <-beat.C:
		case reply = <-h.renew:
			// A process continued after a stop may find its confirmed
			// expiry already past: that is a loss, not a beat to try.
			if !time.Now().Before(deadline) {
				h.lose(h.expired(nil))
				reply <- h.Err()
				return
			}
		}
		// A heartbeat can block for longer than the lease has left (an
		// etcd client cut off from the cluster waits out its request
		// timeout), and the watchdog above cannot fire meanwhile: bound
		// the heartbeat by the deadline.
		bctx, cancel := context.WithDeadline(ctx, deadline)
		h.beat.Lock()
		rec, err := h.store.Heartbeat(bctx, Ref{Kind: h.kind, Owner: h.owner, Token: h.token})
		h.beat.Unlock()
		late := bctx.Err() != nil
		cancel()
		answer := func(err error) {
			if reply != nil {
				reply <- err
			}
		}
		switch {
		case err == nil:
			failures = 0
			h.mu.Lock()
			h.rec, h.failing = rec, nil
			h.mu.Unlock()
			deadline = time.Now().Add(h.untilExpiry())
			if h.renewed != nil {
				h.renewed(deadline)
			}
			resetTimer(expiry, time.Until(deadline))
			resetTimer(beat, h.interval)
			answer(nil)
		case ctx.Err() != nil:
			answer(ErrHoldEnded)
			return
		case definiteLoss(err):
			h.lose(err)
			answer(h.Err())
			return
		case late:
			h.lose(h.expired(err))
			answer(h.Err())
			return
		default:
			h.mu.Lock()
			h.failing = err
			h.mu.Unlock()
			if !errors.Is(err, ErrUnavailable) {
				failures++
			}
			if failures >= 2 {
				h.lose(fmt.Errorf("two heartbeats in a row failed: %w", err))
				answer(h.Err())
				return
			}
			resetTimer(beat, h.pause)
			answer(err)
		}
	}
}

// expired is the loss of a lease whose confirmed expiry (less the margin)
// passed without a renewal; last is the heartbeat cut short by it, if any.
func (h *Hold) expired(last error) error {
	err := fmt.Errorf("%w: %s expires at %s and no heartbeat was confirmed in time", ErrExpired, h.kind, FormatTime(h.Record().Seen.ExpiresAt))
	if last != nil {
		err = fmt.Errorf("%w (the last one was cut short: %v)", err, last)
	}
	return err
}

// untilExpiry is the time left before the last confirmed record lapses,
// less the backend's safety margin ([ExpiryMarginer]): a holder that
// cannot confirm a renewal gives up before anyone else can be granted
// the lease.
func (h *Hold) untilExpiry() time.Duration {
	rec := h.Record()
	left := rec.Seen.ExpiresAt.Sub(h.store.Now())
	if m, ok := h.store.b.(ExpiryMarginer); ok {
		left -= m.ExpiryMargin(rec.TTL())
	}
	return max(left, 0)
}

func (h *Hold) lose(cause error) {
	h.mu.Lock()
	h.err, h.definite = &lostError{cause}, definiteLoss(cause)
	h.mu.Unlock()
	close(h.done)
}

// resetTimer restarts t for d, draining a tick that fired meanwhile.
func resetTimer(t *time.Timer, d time.Duration) {
	t.Stop()
	t.Reset(d)
}
