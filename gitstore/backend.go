package gitstore

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// PollInterval is how often a waiter re-reads a held lease on a git store
// (each read is a fetch from the remote), unless the store's options say
// otherwise.
const PollInterval = 2 * time.Second

// ErrUnreachable reports a remote that git could not reach or that did not
// answer within [CallTimeout].
var ErrUnreachable = fmt.Errorf("%w: git remote unreachable", lease.ErrUnavailable)

// Backend is a lease store on a git remote. It is safe for concurrent use.
type Backend struct {
	loc     Location
	clock   lease.Clock
	scratch string
	timeout time.Duration // per git call: CallTimeout

	// fetchMu serializes fetches into the scratch repository (a shallow
	// fetch rewrites its list of shallow commits) and the reads of what
	// they fetched.
	fetchMu sync.Mutex

	obs *observations // the host's sightings (patience rule)

	// pushHook, in tests, makes each push instead of the backend: with
	// push, the real one (of any updates: a push that lands late), and
	// its own result (a lost reply); onGit, in tests, sees every git
	// command line.
	pushHook func(ps []push, push func([]push) error) error
	onGit    func(args []string)
}

// Options are a [Backend]'s own settings, as dirstore.Options and
// etcdstore.Options are the other stores'; the zero value is the default.
type Options struct {
	// StateDir is where the host's sightings of tips are kept (see the
	// package documentation); it is created private if missing and must
	// belong to the user and be writable by no one else. "" keeps them in
	// [DefaultStateDir] with the real clock and in memory with any other.
	StateDir string
}

// NewBackend parses url and makes a backend with a private scratch
// repository, for a caller that wraps it before it makes a [lease.Store]
// with [lease.New] (pass the same opts to both; the backend judges
// liveness on their clock). It does not contact the remote.
func NewBackend(url string, o Options, opts ...lease.Option) (*Backend, error) {
	loc, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	clock, err := lease.ClockOf(opts...)
	if err != nil {
		return nil, err
	}
	if clock == nil {
		clock = lease.WallClock{}
	}
	stateDir := o.StateDir
	if _, real := clock.(lease.WallClock); real && stateDir == "" {
		stateDir, _ = DefaultStateDir() // none: memory only
	}
	obs := &observations{store: loc.String(), clock: clock}
	if stateDir != "" {
		obs.path = stateFile(stateDir, obs.store)
	}
	dir, err := os.MkdirTemp("", "gitstore-")
	if err != nil {
		return nil, fmt.Errorf("gitstore: scratch repository: %w", err)
	}
	b := &Backend{loc: loc, clock: clock, scratch: dir, timeout: CallTimeout, obs: obs}
	if _, err := b.git(context.Background(), nil, "init", "--quiet", "--bare", "--template=", dir); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("gitstore: scratch repository: %w", err)
	}
	return b, nil
}

// Open opens url as a [lease.Store]. Like [NewBackend] it does not contact
// the remote: the first operation does, and reports [ErrUnreachable] if
// it does not answer (a probe here would cost every CLI call a round
// trip). It returns the function that removes the scratch repository.
func Open(ctx context.Context, url string, opts ...lease.Option) (*lease.Store, func() error, error) {
	b, err := NewBackend(url, Options{}, opts...)
	if err != nil {
		return nil, nil, err
	}
	s, err := lease.New(b, append([]lease.Option{lease.WithPollInterval(PollInterval)}, opts...)...)
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return s, b.Close, nil
}

// WhyNoPools says why a git store keeps no pools (pool.PoolRefuser): a
// pool's queue is many small writes by many waiters, each a push here.
func (b *Backend) WhyNoPools() string {
	return "a git store keeps leases and batons (lease, pool-run --kind K), not pools, whose queue would be a push per waiter per heartbeat; use a directory store on one host or an etcd:// store across machines"
}

// Close removes the scratch repository.
func (b *Backend) Close() error { return os.RemoveAll(b.scratch) }

// String names the store.
func (b *Backend) String() string { return b.loc.String() }

// Location is where the store is.
func (b *Backend) Location() Location { return b.loc }

// Now is the store's clock.
func (b *Backend) Now() time.Time { return b.clock.Now() }

func (b *Backend) leaseRef(kind string) string {
	return "refs/durable-lease/" + b.loc.Namespace + "/leases/" + kind
}

// JournalWhere names the journal's ref, for messages.
func (b *Backend) JournalWhere() string { return b.JournalRef() }

// JournalRef is the ref of the store's journal.
func (b *Backend) JournalRef() string { return "refs/durable-lease/" + b.loc.Namespace + "/journal" }

func checkKind(kind string) error {
	if !lease.ValidKind(kind) || strings.Contains(kind, "..") || strings.HasSuffix(kind, ".lock") || strings.HasSuffix(kind, ".") {
		return fmt.Errorf("%w: kind %q must match %s and be a ref name", lease.ErrInvalid, kind, lease.KindPattern)
	}
	return nil
}

var _ lease.Backend = (*Backend)(nil)
