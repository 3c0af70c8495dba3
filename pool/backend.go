package pool

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// Backend is where a pool keeps everything that is not a slot lease: its
// queue of waiters, the hold times behind its ETAs, the grant documents of
// async requests, its nudges and its log, and the wake-ups of its waiters.
// The slot leases themselves live in the [lease.Store] under the pool, so
// a Backend goes with the store's backend: files in <store>/<name>/ for a
// directory store (docs/PROTOCOL.md §6), keys under the store's prefix on
// etcd (§8.4). Everything above it (acquire, claim, release, pump, status)
// is the same code on both.
//
// Methods that fail with an error matching lease.ErrUnavailable could not
// reach the place the state is kept; the others' errors are the state's
// own.
type Backend interface {
	// Where names the state for people (status prints it as "dir").
	Where() string

	// Queue returns the live entries, first first, without a lock: the
	// entries whose waiter is still heartbeating them. stale is how many
	// silent entries the state still holds; a sweep drops them.
	Queue(ctx context.Context) (live []Entry, stale int, err error)
	// UpdateQueue replaces the live queue with what fn returns, atomically
	// with respect to every other UpdateQueue of the pool, and drops the
	// silent entries in the same change, returning them (for the pool's
	// log). fn gets the live entries and returns them filtered, changed
	// (a new heartbeat) and with new entries appended at the end; it must
	// not reorder them, and may be called more than once, so it must have
	// no effects of its own. Nothing is written when fn's result is the
	// live queue as it was and nothing was silent. owner is who makes the
	// change, for a lock that names its holder.
	UpdateQueue(ctx context.Context, owner string, fn func(live []Entry) ([]Entry, error)) (dropped []Entry, err error)

	// Holds returns the recent hold durations in milliseconds, oldest
	// first (empty when there are none or they cannot be read: they only
	// feed ETAs).
	Holds(ctx context.Context) ([]float64, error)
	// AddHold appends a hold duration, keeping the last keep of them.
	AddHold(ctx context.Context, owner string, ms float64, keep int) error

	// PutGrant stores the grant document of request id (a grant, or the
	// record of a failed one), replacing any.
	PutGrant(ctx context.Context, id string, doc []byte) error
	// Grant returns the grant document of request id, or nil when there
	// is none.
	Grant(ctx context.Context, id string) ([]byte, error)
	// SweepGrants deletes grant documents older than maxAge.
	SweepGrants(ctx context.Context, maxAge time.Duration)

	// AppendLog adds one line (a JSON object, without its newline) to the
	// pool's log, and AppendNudge one to its nudges.
	AppendLog(ctx context.Context, line []byte) error
	AppendNudge(ctx context.Context, line []byte) error
	// Log returns the pool's log lines, oldest first.
	Log(ctx context.Context) ([][]byte, error)

	// Watch starts the wake-ups of one waiter, for the slots whose lease
	// kinds are given. It never fails: a state that cannot watch leaves
	// the channels silent, and the waiter polls. stop ends the watch.
	Watch(ctx context.Context, slotKinds []string) (w Wakeups, stop func())
}

// EntryWatcher is implemented by backends that can wake a waiter for its
// own entry only (the directory store's bells, etcd watches of the
// entries just ahead) instead of on every change of the queue. Like
// [Backend.Watch] it never fails: a backend that cannot watch leaves the
// channels silent, and the waiter polls.
type EntryWatcher interface {
	WatchEntry(ctx context.Context, id string, slotKinds []string) (Wakeups, func())
}

// EntryToucher is implemented by backends that can record a waiter's
// heartbeat beside the queue in O(1) (the directory store: the access time
// of its bell, PROTOCOL §6.12), and carry it into the queue whenever they
// rewrite it. Then a heartbeat rewrites the queue only when no rewrite has
// carried one for a while, instead of every waiter rewriting the whole
// queue at each of its heartbeats (N waiters, N rewrites of N entries).
type EntryToucher interface {
	// TouchEntry records that entry id's waiter is alive now; false if
	// the store cannot (the entry has no bell).
	TouchEntry(id string, now time.Time) bool
}

// BackendProvider is implemented by lease backends that keep pools' state
// too (package etcdstore's). [Open] finds it on the store's backend, or
// through [RegisterProvider].
type BackendProvider interface {
	// PoolBackend returns the state of the pool cfg describes. host is
	// what the pool lends it; a backend may ignore it.
	PoolBackend(cfg *Config, host Host) (Backend, error)
}

// PoolRefuser is implemented by lease backends that keep no pools by
// design (package gitstore's): [Open] fails with an error matching
// lease.ErrInvalid (a usage error) that gives WhyNoPools, a sentence
// saying why and what to use instead.
type PoolRefuser interface {
	WhyNoPools() string
}

// RegisterProvider adds find to the ways [Open] looks for the
// [BackendProvider] of a store: after asking the store's lease backend
// itself, it asks each registered find in turn, which returns nil for a
// backend it does not serve. It is for a store whose lease backend must
// not depend on this package: the directory store's pools are package
// dirstore/dirpool's, which registers itself when it is linked, because
// the lease command links the directory store and must not link pool.
func RegisterProvider(find func(lease.Backend) BackendProvider) {
	providersMu.Lock()
	defer providersMu.Unlock()
	providers = append(providers, find)
}

var (
	providersMu sync.Mutex
	providers   []func(lease.Backend) BackendProvider
)

// providerFor is the BackendProvider of b, or nil.
func providerFor(b lease.Backend) BackendProvider {
	if sp, ok := b.(BackendProvider); ok {
		return sp
	}
	providersMu.Lock()
	defer providersMu.Unlock()
	for _, find := range providers {
		if sp := find(b); sp != nil {
			return sp
		}
	}
	return nil
}

// Host is what a pool lends the [Backend] it opens, for a backend that
// judges its queue itself or writes to the pool's log (the directory
// store: its queue lock is a lease, and it drops silent entries when it
// rewrites the queue).
type Host struct {
	// Store is the lease store of the pool's slots, and its clock.
	Store *lease.Store
	// Live splits entries into those whose waiter still heartbeats them
	// and those gone silent, on the store's clock and the pool's
	// waiterStaleMs (PROTOCOL §6.3). It keeps the entries' order.
	Live func(entries []Entry) (live, stale []Entry)
	// Event appends one event to the pool's log. The log is best effort:
	// a failure is reported on Log, never returned.
	Event func(ctx context.Context, event string, fields map[string]any)
	// Log receives what a backend must tell people but cannot return
	// (a log it could not rotate). It is never nil.
	Log io.Writer
}

// Wakeups are the channels of a waiter's watch. Slots receives a value
// soon after a slot lease may have been freed, Queue soon after an entry
// joined or left the queue, so a waiter re-checks within milliseconds of a
// release instead of at its next poll. They are separate so that a waiter
// that cannot be granted whatever the slots do (too far back in the queue)
// listens to the queue only: a release then wakes the waiters that could
// take the slot, not every waiter (a herd). Values may be spurious; a
// waiter always re-reads.
type Wakeups struct {
	Slots, Queue <-chan struct{}
	// Listen starts or stops the slot wake-ups; it returns once they are
	// in place, so an attempt made after Listen(true) misses nothing.
	Listen func(on bool)

	stop func() // the waiter's, from Watch
}
