package lease

import (
	"context"
	"time"
)

// The optional seams of a [Backend]. The [Store] looks for each on its
// backend with a type assertion and falls back to what every backend can
// do when it is absent, so a new backend implements [Backend] first and
// any of these later. Each states what an error from it means: none of
// them may turn a failure into a success.

// ExpiryMarginer is implemented by backends whose expiry is decided
// somewhere else than the holder (a server): the holder's last confirmed
// expiry is only an estimate, late by the time the confirmation took to
// arrive, and the server may hand the lease to someone else the moment it
// lapses there. A [Hold] on such a backend declares the lease lost
// ExpiryMargin(ttl) before its estimated expiry.
type ExpiryMarginer interface {
	ExpiryMargin(ttl time.Duration) time.Duration
}

// RenewalGapper is implemented by backends whose renewals can go
// unanswered for a while through a fault the store itself rides out with
// the lease intact: an etcd cluster electing a new leader (etcd extends
// every lease when a new leader takes over), a git remote restarting. A
// [Hold] already waits such a fault out until its deadline; a supervisor
// that stops the work when renewals are late (pool-run's guardian) must
// not begin to sooner than RenewalGap after a renewal was due, and a TTL
// too short to leave that room cannot be kept.
type RenewalGapper interface {
	// RenewalGap is how late a renewal may be through such a fault, and
	// why (for messages: what the store assumes or learnt). It never
	// fails: without an answer from the store it returns what the store
	// assumes.
	RenewalGap(ctx context.Context) (gap time.Duration, why string)
}

// Watcher is implemented by backends that can report changes to a kind's
// record, so a waiter wakes as soon as a lease is released instead of at the
// next poll. Events may be spurious; a waiter always re-reads.
type Watcher interface {
	// Watch delivers a value on the channel after kind's record may have
	// changed, until ctx is done. Missed values coalesce. An error means
	// no watch could be set up: the waiter then polls.
	Watch(ctx context.Context, kind string) (<-chan struct{}, error)
}

// Peeker is implemented by backends that can read a record without its
// fence, which costs more system calls than the record itself.
type Peeker interface {
	// Peek is [Backend.Read] with the record's Fence left 0. Its errors
	// are Read's: an error is never reported as "no record".
	Peek(ctx context.Context, kind string) (*Record, error)
}

// UnfencedUpdater is a backend whose Update can skip reading the fence of
// the current record, for a change that never looks at it.
type UnfencedUpdater interface {
	// UpdateUnfenced is [Backend.Update], except that the record fn gets
	// may have Fence 0. The Store calls it only with an fn that ignores
	// the fence and for a change whose record it does not hand on (a
	// release). Its errors are Update's; when it fails nothing changed.
	UpdateUnfenced(ctx context.Context, kind string, fn func(*Record) (Change, error)) (*Record, error)
}

// ReadingUpdater is implemented by backends whose Update reads the
// record before it locks or writes anything, so that a refusal fn decides
// costs no more than a [Backend.Read] (a git store: a fetch, then a push
// only for a change). [Store.Acquire] then skips the lock-free read it
// otherwise makes first, which would cost such a store a second round
// trip for every acquire that succeeds.
type ReadingUpdater interface {
	// UpdateReadsFirst reports whether Update reads before it locks.
	UpdateReadsFirst() bool
}

// Sweeper is implemented by backends that leave temporary entries behind
// when a process dies mid-operation and can remove them.
type Sweeper interface {
	// Sweep removes the temporaries of dead operations on kind ("" for
	// every kind) and returns how many it removed. It never fails: what it
	// cannot remove it leaves for the next sweep, and it never removes an
	// entry of an operation still running.
	Sweep(kind string) int
}

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
