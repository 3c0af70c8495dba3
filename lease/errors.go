package lease

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors. Match them with errors.Is; the CLI maps each to a stable
// code word and an exit status in one place.
var (
	// ErrInvalid reports a caller mistake: a bad kind, owner, TTL, token,
	// payload or owner pattern. Nothing on disk was touched.
	ErrInvalid = errors.New("lease: invalid argument")
	// ErrHeld reports that a live lease of another acquisition is in the way.
	ErrHeld = errors.New("lease: held")
	// ErrTimeout reports that a wait for a lease ended before it came free.
	ErrTimeout = errors.New("lease: timed out waiting")
	// ErrNotHeld reports a heartbeat on a kind that has no record.
	ErrNotHeld = errors.New("lease: not held")
	// ErrExpired reports a heartbeat on a lease past its TTL (or unreadable):
	// an expired lease is forfeit even for its owner and is never revived.
	ErrExpired = errors.New("lease: expired")
	// ErrNotOwner reports an owner or fencing token that does not match the
	// record: the caller does not hold this incarnation of the lease.
	ErrNotOwner = errors.New("lease: not owner")
	// ErrTokenMismatch reports a release by the record's owner with a token
	// that is not the record's: the lease was taken over since (or the
	// token is wrong). It wraps ErrNotOwner, so errors.Is matches both.
	ErrTokenMismatch error = &wrappedError{msg: ErrNotOwner.Error() + ": token mismatch", err: ErrNotOwner}
	// ErrNotDead reports a reap of a lease that is still live.
	ErrNotDead = errors.New("lease: not dead")
	// ErrGuardBusy reports that the per-kind critical section stayed occupied
	// by a live process for longer than the guard wait bound.
	ErrGuardBusy = errors.New("lease: guard busy")
	// ErrUnavailable reports a store that did not answer in time (a
	// cluster that cannot be reached): nothing is known to have changed.
	ErrUnavailable = errors.New("lease: store unavailable")
)

// wrappedError is what fmt.Errorf("%w: ...") makes; the sentinel errors
// below use it so that initialising the package formats nothing
// (TestNoFmtAtInit).
type wrappedError struct {
	msg string
	err error
}

func (e *wrappedError) Error() string { return e.msg }
func (e *wrappedError) Unwrap() error { return e.err }

// lostError is a loss and its cause: it matches ErrLost and the cause, and
// says "lease: " once ("lease: lost: not held: …", not "lease: lost:
// lease: not held: …").
type lostError struct{ cause error }

func (e *lostError) Error() string {
	return ErrLost.Error() + ": " + strings.TrimPrefix(e.cause.Error(), "lease: ")
}
func (e *lostError) Unwrap() []error { return []error{ErrLost, e.cause} }

// HeldError carries the live record that refused an acquisition. It matches
// ErrHeld, and also ErrTimeout when it ends a wait.
type HeldError struct {
	Record    *Record
	ExpiresAt time.Time
	// Waited is how long the caller waited before giving up (0 without a wait).
	Waited  time.Duration
	Timeout bool
}

func (e *HeldError) Error() string {
	holder := "another owner"
	if e.Record != nil {
		holder = fmt.Sprintf("%q", e.Record.Owner)
	}
	msg := fmt.Sprintf("lease %s is held by %s until %s", e.kind(), holder, FormatTime(e.ExpiresAt))
	if e.Timeout {
		return fmt.Sprintf("timed out after %s waiting: %s", e.Waited.Round(time.Millisecond), msg)
	}
	return msg
}

// expiresAt is e's ExpiresAt, zero for a nil e.
func (e *HeldError) expiresAt() time.Time {
	if e == nil {
		return time.Time{}
	}
	return e.ExpiresAt
}

func (e *HeldError) kind() string {
	if e.Record == nil {
		return "?"
	}
	return e.Record.Kind
}

// Is reports whether target is ErrHeld, or ErrTimeout for an ended wait.
func (e *HeldError) Is(target error) bool {
	return target == ErrHeld || (e.Timeout && target == ErrTimeout)
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
