package dirstore

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/storefile"
	"github.com/durable-lease/durable-lease/lease"
)

// Options are the directory store's own settings, beside the
// [lease.Option]s of the store above it. The zero value is the default.
type Options struct {
	// GuardWait bounds how long a mutation waits for a kind's critical
	// section (0: [DefaultGuardWait]).
	GuardWait time.Duration
	// GuardStale is the age past which a guard whose holder cannot be
	// identified is judged abandoned (0: [DefaultGuardStale]). Keep it far
	// above any plausible hold.
	GuardStale time.Duration
}

// Open returns a lease store over the directory dir, with the default
// [Options]. The directory is created by the first mutation, not by Open;
// one already there must be safe to use ([ErrUnsafeStore]).
func Open(dir string, opts ...lease.Option) (*lease.Store, error) {
	return OpenWith(dir, Options{}, opts...)
}

// OpenWith is [Open] with the directory store's own settings. The
// backend judges liveness on the clock opts give the store.
func OpenWith(dir string, o Options, opts ...lease.Option) (*lease.Store, error) {
	b, err := NewBackend(dir, o, opts...)
	if err != nil {
		return nil, err
	}
	return lease.New(b, opts...)
}

// NewBackend returns the backend of the store over dir, for a caller that
// wraps it (to observe it) before it makes a [lease.Store] with
// [lease.New]; pass the same opts to both.
func NewBackend(dir string, o Options, opts ...lease.Option) (*Backend, error) {
	if lease.IsStoreURL(dir) {
		scheme, _, _ := strings.Cut(dir, "://")
		return nil, fmt.Errorf("%w: store %q: %s:// stores are not supported; the store is a directory path (write ./%s to mean a directory of that name)", lease.ErrInvalid, dir, scheme, dir)
	}
	g := guardConfig{wait: o.GuardWait, stale: o.GuardStale}
	if g.wait < 0 || g.stale < 0 {
		return nil, fmt.Errorf("%w: guard wait %s and stale age %s must not be negative", lease.ErrInvalid, g.wait, g.stale)
	}
	if g.wait == 0 {
		g.wait = DefaultGuardWait
	}
	if g.stale == 0 {
		g.stale = DefaultGuardStale
	}
	clock, err := lease.ClockOf(opts...)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("dirstore: store %s: %w", dir, err)
	}
	return newBackend(abs, clock, g)
}

// Dir is the store's directory, absolute.
func (b *Backend) Dir() string { return b.dir }

// String names the store for people: its directory.
func (b *Backend) String() string { return b.dir }

// JournalWhere names the journal file, for messages.
func (b *Backend) JournalWhere() string { return JournalName }

// EnsureDir makes sure the store's directory exists, creating it (mode
// 0700, whatever the umask) if it is missing, and that it was judged safe
// to use ([ErrUnsafeStore]), for what keeps files of its own under it (a
// pool's state). group reports a group store, whose files are 0660 and
// directories 2770; otherwise they are 0600 and 0700.
func (b *Backend) EnsureDir() (group bool, err error) {
	perm, err := b.ensureDir()
	return perm == storefile.Group, err
}
