package dirstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/sys/jsonfast"
	"github.com/durable-lease/durable-lease/internal/sys/storefile"
	"github.com/durable-lease/durable-lease/lease"
)

// guardConfig bounds how long a caller waits to enter a kind's critical
// section and how old a guard must be before it is judged abandoned when
// its holder's identity cannot be checked.
type guardConfig struct {
	wait  time.Duration
	stale time.Duration
}

// DefaultGuardWait is how long a mutation waits for a kind's critical section.
// Holders keep it for tens of microseconds, so 5 s only passes when a live
// holder is stopped or the disk has stalled.
const DefaultGuardWait = 5 * time.Second

// DefaultGuardStale is the age past which a guard whose holder cannot be
// identified (a guard written by an implementation that records only a pid,
// or one left between mkdir and its holder file) is judged abandoned. It
// matches the reference implementation, four orders of magnitude above a
// normal hold.
const DefaultGuardStale = 60 * time.Second

// holderFile is the file inside a guard directory naming its holder.
const holderFile = "holder.json"

// guardHolder is the content of .guard-<kind>/holder.json. id and pid are the
// fields every implementation writes; the others let a reader on this host
// prove the holder dead: a process is the same one only if its pid, its
// start time since boot, the boot id and the pid namespace all match.
type guardHolder struct {
	ID    string `json:"id"`
	PID   int    `json:"pid"`
	Host  string `json:"host,omitempty"`
	Boot  string `json:"boot,omitempty"`
	PIDNS string `json:"pidns,omitempty"`
	Start uint64 `json:"start,omitempty"`
	// Lock says the holder keeps an exclusive flock on this holder.json
	// while it holds the guard: a free lock then proves it gone.
	Lock bool `json:"lock,omitempty"`
}

// selfHolder describes this process as a guard holder.
func selfHolder() guardHolder {
	p := lease.Self()
	return guardHolder{PID: p.PID, Host: p.Host, Boot: p.Boot, PIDNS: p.PIDNS, Start: p.Start}
}

// process is the holder's process identity.
func (h *guardHolder) process() lease.Process {
	return lease.Process{PID: h.PID, Host: h.Host, Boot: h.Boot, PIDNS: h.PIDNS, Start: h.Start}
}

// heldGuard is a guard this process has entered; lock is its holder.json,
// open with the exclusive flock that keeps it live.
type heldGuard struct {
	kind, path, id string
	lock           *holderLock
	// moved, if set, runs once the guard has been moved away on leaving,
	// before the moved directory is removed: the guard is free from then.
	moved func()
}

// mkdirGuard is the mkdir form of entry: the directory first, then the
// holder file, locked before its content is written, so whoever reads a
// holder that says "lock" finds the lock already held.
func mkdirGuard(path string, holder []byte, perm storefile.Perm) (*holderLock, error) {
	if err := storefile.Mkdir(path, perm); err != nil {
		return nil, err
	}
	lock, err := createLockedFile(filepath.Join(path, holderFile), holder, perm)
	if err != nil {
		_ = os.RemoveAll(path)
		return nil, err
	}
	return lock, nil
}

func (b *Backend) guardPath(kind string) string {
	return filepath.Join(b.dir, ".guard-"+kind)
}

// enterGuard takes kind's critical section. It creates the guard directory
// atomically with its holder file already inside; if a guard exists it
// judges whether its holder is dead, recovers it if so, and otherwise backs
// off and retries until the guard wait bound or ctx ends.
func (b *Backend) enterGuard(ctx context.Context, kind string) (*heldGuard, error) {
	path := b.guardPath(kind)
	me := selfHolder()
	me.ID, me.Lock = lease.RandomHex(16), true
	body := me.marshal()
	deadline := time.Now().Add(b.guard.wait)
	backoff := 20 * time.Microsecond
	for {
		lock, err := createGuard(path, body, b.perm())
		if err == nil {
			return &heldGuard{kind: kind, path: path, id: me.ID, lock: lock}, nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(b.dir); errors.Is(serr, fs.ErrNotExist) {
				return nil, errNoStore
			}
			// The store directory appeared between our try and the
			// check (another process's first mutation): judged like
			// one found by Open, then tried again.
			if jerr := b.judgeAppeared(); jerr != nil {
				return nil, jerr
			}
			continue
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("lease: guard %s: %w", kind, err)
		}
		v := b.judgeGuard(path)
		v.close()
		if v.stale {
			if err := b.reapGuard(kind, path); err != nil {
				return nil, err
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("lease: guard %s: %w", kind, err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: %s held by %s for over %s; remove it only if that process is gone",
				lease.ErrGuardBusy, path, v.describe(), b.guard.wait)
		}
		time.Sleep(backoff/2 + rand.N(backoff))
		backoff = min(backoff*2, 4*time.Millisecond)
	}
}

// errNoStore reports that the store directory does not exist yet.
var errNoStore = errors.New("lease: store directory does not exist")

// verdict is a judgment of a guard found in the way. A guard judged dead
// by its free lock comes with that lock taken (shared) in lock, the proof
// that the holder file at the guard path is the dead holder's; close
// releases it.
type verdict struct {
	stale  bool
	reason string
	holder *guardHolder
	lock   *os.File
}

func (v *verdict) close() {
	if v.lock != nil {
		v.lock.Close()
		v.lock = nil
	}
}

func (v verdict) describe() string {
	if v.holder == nil {
		return "an unidentified holder"
	}
	return fmt.Sprintf("pid %d", v.holder.PID)
}

// judgeGuard decides whether the guard at path belongs to a dead holder.
// A holder that keeps its holder file locked is dead exactly when that lock
// is free while its file is still the guard's: the kernel drops the lock
// when the holder dies, and a holder that leaves moves its guard away
// before it lets go of the lock. Any other holder that identifies itself
// fully is judged by its process; the rest only by age.
func (b *Backend) judgeGuard(path string) verdict {
	hf := filepath.Join(path, holderFile)
	f, data, err := openHolderFile(hf)
	var h *guardHolder
	if err == nil {
		h = parseHolder(data)
	}
	guardHook("judge:read")
	if h != nil && h.Lock && sameHost(h) {
		lerr := flockRetry(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if lerr == nil && sameFile(f, hf) {
			return verdict{stale: true, reason: fmt.Sprintf("holder pid %d no longer holds its guard's lock", h.PID), holder: h, lock: f}
		}
		f.Close()
		if lerr == nil || errors.Is(lerr, unix.EWOULDBLOCK) {
			// Held by a live process, or already replaced: not dead.
			return verdict{holder: h}
		}
		// Locks do not work here (a filesystem without flock): judge as
		// an implementation without them would.
	} else if f != nil {
		f.Close()
	}
	if h != nil {
		if alive, reason, known := h.process().Alive(); known {
			return verdict{stale: !alive, reason: reason, holder: h}
		}
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return verdict{holder: h} // gone already: just retry
	}
	if age := time.Since(fi.ModTime()); age > b.guard.stale {
		return verdict{stale: true, reason: fmt.Sprintf("unidentified guard %s old", age.Round(time.Millisecond)), holder: h}
	}
	return verdict{holder: h}
}

// sameHost reports whether a holder ran on this host, in this boot and pid
// namespace, as far as it says: only there is its lock, as this process
// sees it, the lock the holder took (a filesystem shared with another host
// may not show other hosts' locks at all).
func sameHost(h *guardHolder) bool {
	me := selfHolder()
	return h.Host == me.Host && h.Boot == me.Boot && h.PIDNS == me.PIDNS
}

// holderIs reports whether the holder file of guardDir names id.
func holderIs(guardDir, id string) bool {
	h := readHolder(guardDir)
	return h != nil && h.ID == id
}

// readHolder reads the holder of the guard directory guardDir, or nil.
func readHolder(guardDir string) *guardHolder {
	f, data, err := openHolderFile(filepath.Join(guardDir, holderFile))
	if err != nil {
		return nil
	}
	f.Close()
	return parseHolder(data)
}

func parseHolder(data []byte) *guardHolder {
	var h guardHolder
	if json.Unmarshal(data, &h) != nil || h.ID == "" {
		return nil
	}
	return &h
}

// reapGuard recovers an abandoned guard. Reapers are serialized by an
// exclusive flock on the store directory, which the kernel drops if a reaper
// dies. Under it the guard is judged again (a previous reaper may already
// have replaced it with a live one) and, if still dead, renamed to a unique
// name, so a concurrent mkdir either precedes the rename (and fails) or
// follows it (and wins a fresh guard no one else touches). The renamed
// directory's holder id is checked against the one judged; if an
// implementation that does not take the flock swapped guards in between, it
// is put back.
func (b *Backend) reapGuard(kind, path string) error {
	unlock, err := lockDir(b.dir)
	if err != nil {
		return fmt.Errorf("lease: guard %s: lock store: %w", kind, err)
	}
	defer unlock()
	guardHook("reap:locked")
	v := b.judgeGuard(path)
	defer v.close()
	if !v.stale {
		return nil
	}
	guardHook("reap:judged")
	dst := path + ".reaped-" + lease.RandomHex(8)
	if err := renameFile(path, dst); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("lease: guard %s: reap: %w", kind, err)
	}
	if !b.sameGuard(dst, v) {
		if err := renameNoReplace(dst, path); err != nil {
			_ = b.Journal(context.Background(), lease.Event{Event: lease.EventGuardLost, Kind: kind, Guard: path, Reason: "guard changed while being reaped and could not be restored"})
		}
		return nil
	}
	_ = os.RemoveAll(dst)
	// A holder that died inside the guard may have died inside another
	// operation of this kind too: clear what such operations left.
	b.sweepLocked(kind)
	e := lease.Event{Event: lease.EventGuardReaped, Kind: kind, Guard: path, Reason: v.reason}
	if v.holder != nil {
		e.Holder, e.PID = v.holder.ID, v.holder.PID
	}
	return b.Journal(context.Background(), e)
}

// sameGuard checks that the directory moved aside at moved is the guard
// judged in v: the same holder file (for a guard judged by its lock), the
// same holder id, or, for a guard judged by age, still
// that old (a fresh guard made meanwhile by an implementation that does not
// take the flock is younger).
func (b *Backend) sameGuard(moved string, v verdict) bool {
	if v.lock != nil {
		return sameFile(v.lock, filepath.Join(moved, holderFile))
	}
	if v.holder != nil {
		got := readHolder(moved)
		return got != nil && got.ID == v.holder.ID
	}
	fi, err := os.Lstat(moved)
	return err == nil && time.Since(fi.ModTime()) > b.guard.stale
}

// leaveGuard gives the critical section back. It captures the guard by
// renaming it to a unique name and checks that it holds this process's
// holder file before deleting it:
// if this process was stopped long enough for an age-based reaper to recover
// its guard, the directory now belongs to someone else and is restored.
// Failures are journaled, not returned: the mutation has already happened,
// and a guard left behind is recovered once this process exits.
func (b *Backend) leaveGuard(g *heldGuard) {
	// The lock goes last: until the guard is moved away, a free lock
	// would tell reapers this holder is dead.
	defer g.lock.Close()
	captured := g.path + ".release-" + lease.RandomHex(8)
	if err := renameFile(g.path, captured); err != nil {
		_ = b.Journal(context.Background(), lease.Event{Event: lease.EventGuardLost, Kind: g.kind, Guard: g.path, Holder: g.id, Reason: "guard was gone at release: " + err.Error()})
		return
	}
	if g.moved != nil {
		g.moved()
	}
	// The captured guard is this holder's exactly when its holder file is
	// the one this process created and still holds open (and locked): an
	// open file's inode is never reused, so no other guard's holder file
	// can be that inode. Comparing inodes (fstat, lstat) answers what
	// reading the file back and comparing ids would, without a read.
	// Where the inodes cannot be compared that way (a filesystem whose
	// fstat and lstat disagree on them: some overlay, FUSE or network
	// ones), the holder id read back decides, as the protocol has it.
	if g.lock.isAt(filepath.Join(captured, holderFile)) || holderIs(captured, g.id) {
		_ = unlinkFile(filepath.Join(captured, holderFile))
		if removeDir(captured) != nil {
			_ = os.RemoveAll(captured)
		}
		return
	}
	reason := "captured another holder's guard at release; restored it"
	if err := renameNoReplace(captured, g.path); err != nil {
		_ = os.RemoveAll(captured)
		reason = "captured another holder's guard at release and could not restore it"
	}
	_ = b.Journal(context.Background(), lease.Event{Event: lease.EventGuardLost, Kind: g.kind, Guard: g.path, Holder: g.id, Reason: reason})
}

// guardHook, when set by a test, is called at named points of the guard
// protocol so the test can interleave other processes' steps there.
var guardHook = func(point string) {}

// marshal is json.Marshal(h), without reflection.
func (h *guardHolder) marshal() []byte {
	b := make([]byte, 0, 256)
	b = append(b, `{"id":`...)
	b = jsonfast.AppendString(b, h.ID, true)
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(h.PID), 10)
	if h.Host != "" {
		b = append(b, `,"host":`...)
		b = jsonfast.AppendString(b, h.Host, true)
	}
	if h.Boot != "" {
		b = append(b, `,"boot":`...)
		b = jsonfast.AppendString(b, h.Boot, true)
	}
	if h.PIDNS != "" {
		b = append(b, `,"pidns":`...)
		b = jsonfast.AppendString(b, h.PIDNS, true)
	}
	if h.Start != 0 {
		b = append(b, `,"start":`...)
		b = strconv.AppendUint(b, h.Start, 10)
	}
	if h.Lock {
		b = append(b, `,"lock":true`...)
	}
	return append(b, '}')
}
