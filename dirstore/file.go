package dirstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/storefile"
	"github.com/durable-lease/durable-lease/lease"
)

// JournalName is the store's journal of takeovers, reaps and forced releases.
const JournalName = "reaped.log"

// Backend is a [lease.Backend] over a directory: it keeps each record in <dir>/<kind>.json and serializes a kind's
// mutations with the guard directory <dir>/.guard-<kind> (see guard.go).
type Backend struct {
	dir   string
	clock lease.Clock
	guard guardConfig
	// mode is the storefile.Perm of what the store creates, with
	// modeJudged set once the directory has been judged safe
	// (checkStoreDir) or made by this process.
	mode atomic.Uint32
}

const modeJudged = 1 << 31

// newBackend does not create dir: reads of a missing store see no
// leases, and the first mutation creates it, so a refused or read-only
// command leaves nothing on disk. A directory already there must pass
// checkStoreDir.
func newBackend(dir string, clock lease.Clock, g guardConfig) (*Backend, error) {
	b := &Backend{dir: dir, clock: clock, guard: g}
	perm, exists, err := checkStoreDir(dir)
	if err != nil {
		return nil, err
	}
	b.setMode(perm, exists)
	return b, nil
}

func (b *Backend) setMode(perm storefile.Perm, judged bool) {
	m := uint32(perm)
	if judged {
		m |= modeJudged
	}
	b.mode.Store(m)
}

// perm is the permission set of what the store creates.
func (b *Backend) perm() storefile.Perm {
	return storefile.Perm(b.mode.Load() &^ modeJudged)
}

// ensureDir makes sure the store directory exists and has been judged
// safe, creating it (0700) if it is missing; it returns the store's
// permission set.
func (b *Backend) ensureDir() (storefile.Perm, error) {
	m := b.mode.Load()
	if m&modeJudged != 0 {
		if _, err := os.Lstat(b.dir); err == nil {
			return storefile.Perm(m &^ modeJudged), nil
		}
	}
	perm, err := makeStoreDir(b.dir)
	if err != nil {
		return perm, fmt.Errorf("lease: store %s: %w", b.dir, err)
	}
	b.setMode(perm, true)
	return perm, nil
}

// judgeAppeared judges a store directory that appeared after Open found
// none (made by another process), once.
func (b *Backend) judgeAppeared() error {
	if b.mode.Load()&modeJudged != 0 {
		return nil
	}
	perm, exists, err := checkStoreDir(b.dir)
	if err != nil {
		return err
	}
	b.setMode(perm, exists)
	return nil
}

func (b *Backend) recordPath(kind string) string {
	return filepath.Join(b.dir, kind+".json")
}

// Now implements [lease.Backend].
func (b *Backend) Now() time.Time { return b.clock.Now() }

// judge sets rec.Seen by the clock rule (PROTOCOL §2.3) at this instant.
func (b *Backend) judge(rec *lease.Record) {
	if rec == nil {
		return
	}
	now := b.clock.Now()
	var boot *lease.BootStamp
	if bc, ok := b.clock.(lease.BootClock); ok {
		if s, ok := bc.Boot(); ok {
			boot = &s
		}
	}
	rec.Seen = rec.Judge(now, boot)
}

// Read implements [lease.Backend].
func (b *Backend) Read(_ context.Context, kind string) (*lease.Record, error) {
	return b.read(kind)
}

// Peek implements [lease.Peeker].
func (b *Backend) Peek(_ context.Context, kind string) (*lease.Record, error) {
	return b.readRecord(kind, false)
}

func (b *Backend) read(kind string) (*lease.Record, error) {
	return b.readRecord(kind, true)
}

// readRecord is read; withFence false leaves the record's Fence unset
// (for a caller that never looks at it), which saves reading the counter.
func (b *Backend) readRecord(kind string, withFence bool) (*lease.Record, error) {
	data, uid, err := storefile.ReadOwned(b.recordPath(kind), lease.MaxRecordBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if errors.Is(err, storefile.ErrNotRegular) || errors.Is(err, storefile.ErrTooLarge) {
		// Judged like any unreadable record (unknown, and taken over by
		// the next acquire, whose rename replaces the entry itself), but
		// nothing behind it is read, shown or journaled.
		return &lease.Record{Kind: kind, Corrupt: true, Reason: errors.Unwrap(err).Error(), Seen: lease.Liveness{Rule: lease.RuleCorrupt}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lease: read %s: %w", kind, err)
	}
	rec := lease.DecodeRecord(kind, data)
	rec.WriterUID = &uid
	if withFence {
		b.attachFence(rec)
	}
	b.judge(rec)
	return rec, nil
}

// write replaces the record atomically: a uniquely named temporary file in
// the same directory, renamed over <kind>.json, so lock-free readers see the
// old record or the new one and never a torn one.
func (b *Backend) write(kind string, r *lease.Record) error {
	if r.Kind != kind {
		return fmt.Errorf("lease: write %s: the record names kind %q", kind, r.Kind)
	}
	data, err := r.EncodeFile()
	if err != nil {
		return fmt.Errorf("lease: encode %s: %w", kind, err)
	}
	tmp := filepath.Join(b.dir, ".tmp-"+kind+"-"+lease.RandomHex(8))
	werr := storefile.WriteNew(tmp, data, b.perm())
	if werr == nil {
		werr = renameFile(tmp, b.recordPath(kind))
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("lease: write %s: %w", kind, werr)
	}
	return nil
}

func (b *Backend) remove(kind string) error {
	err := unlinkFile(b.recordPath(kind))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("lease: remove %s: %w", kind, err)
	}
	return nil
}

// Update implements [lease.Backend]. On a store directory that does not exist
// yet, fn first runs with no record outside the guard: if it decides to
// change nothing (a refusal, or a no-op release), nothing is created.
// Only a change creates the directory and runs fn again under the guard.
// A change's event is journaled inside the guard before the change is
// made; a change whose event cannot be journaled is not made.
func (b *Backend) Update(ctx context.Context, kind string, fn func(*lease.Record) (lease.Change, error)) (*lease.Record, error) {
	return b.update(ctx, kind, fn, true)
}

// UpdateUnfenced is Update for a fn that never looks at the current
// record's Fence and never hands the record on (a release): the fence
// counter is then not read.
func (b *Backend) UpdateUnfenced(ctx context.Context, kind string, fn func(*lease.Record) (lease.Change, error)) (*lease.Record, error) {
	return b.update(ctx, kind, fn, false)
}

func (b *Backend) update(ctx context.Context, kind string, fn func(*lease.Record) (lease.Change, error), withFence bool) (*lease.Record, error) {
	g, err := b.enterGuard(ctx, kind)
	if errors.Is(err, errNoStore) {
		ch, ferr := fn(nil)
		if ferr != nil || ch.Op == lease.OpNone {
			return nil, ferr
		}
		if _, err := b.ensureDir(); err != nil {
			return nil, err
		}
		g, err = b.enterGuard(ctx, kind)
	}
	if err != nil {
		return nil, err
	}
	defer b.leaveGuard(g)
	cur, err := b.readRecord(kind, withFence)
	if err != nil {
		return nil, err
	}
	ch, err := fn(cur)
	if err != nil || ch.Op == lease.OpNone {
		return nil, err
	}
	if ch.Event != nil {
		if err := b.Journal(ctx, *ch.Event); err != nil {
			return nil, fmt.Errorf("lease %s: %s refused: it could not be journaled: %w", kind, ch.Event.Event, err)
		}
	}
	next := ch.Record
	switch ch.Op {
	case lease.OpAcquire:
		// A new incarnation (acquire or takeover): the next fence.
		var floor int64
		if cur != nil {
			floor = cur.Fence
		}
		if next.Fence, err = b.nextFence(kind, next.Token, floor); err != nil {
			return nil, err
		}
	case lease.OpRenew:
		if cur == nil || cur.Token != next.Token {
			return nil, fmt.Errorf("lease: renew %s: the record is not the incarnation being renewed", kind)
		}
		next.Fence = cur.Fence
	case lease.OpDelete:
		err := b.remove(kind)
		if err == nil {
			// Rung once the guard is moved away: the head of kind's line,
			// woken, finds the guard free for its attempt (PROTOCOL §4.2).
			g.moved = func() { b.ring(kind) }
		}
		return nil, err
	default:
		return nil, fmt.Errorf("lease: update %s: unknown op %d", kind, ch.Op)
	}
	if err := b.write(kind, next); err != nil {
		return nil, err
	}
	b.judge(next)
	return next, nil
}

// Names implements [lease.Backend]: every <name>.json in the store whose name does
// not start with a dot.
func (b *Backend) Names(context.Context) ([]string, error) {
	entries, err := os.ReadDir(b.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lease: list %s: %w", b.dir, err)
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".json") || e.IsDir() {
			continue
		}
		names = append(names, strings.TrimSuffix(n, ".json"))
	}
	sort.Strings(names)
	return names, nil
}

// Journal implements [lease.Backend]: one JSON line appended with a single write,
// which O_APPEND keeps whole against concurrent appenders.
func (b *Backend) Journal(_ context.Context, e lease.Event) error {
	if e.At.IsZero() {
		e.At = b.clock.Now()
	}
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("lease: journal: %w", err)
	}
	if err := storefile.Append(filepath.Join(b.dir, JournalName), append(line, '\n'), b.perm()); err != nil {
		return fmt.Errorf("lease: journal: %w", err)
	}
	return nil
}

var (
	_ lease.Backend         = (*Backend)(nil)
	_ lease.Sweeper         = (*Backend)(nil)
	_ lease.Peeker          = (*Backend)(nil)
	_ lease.UnfencedUpdater = (*Backend)(nil)
)
