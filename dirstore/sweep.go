package dirstore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// temporaryKinds are the infixes of this implementation's temporaries:
// .guard-<kind>.new-<r>, .guard-<kind>.reaped-<r>, .guard-<kind>.release-<r>
// (guard directories being created, reaped or left) and .tmp-<kind>-<r>
// (a record being written).
var temporaryKinds = []string{".new-", ".reaped-", ".release-"}

// Sweep implements [lease.Sweeper]. It takes the store's flock, as reapers do:
// a kind may itself look like a temporary (".guard-a.new-..." is also the
// guard of kind "a.new-..."), and a dead guard is only ever removed under
// that lock.
func (b *Backend) Sweep(kind string) int {
	unlock, err := lockDir(b.dir)
	if err != nil {
		return 0
	}
	defer unlock()
	return b.sweepLocked(kind)
}

// sweepLocked removes temporaries; the caller holds the store's flock. An
// entry is removed only when it is one of
// the temporaries above, older than the guard stale bound (an operation
// holds one for microseconds), and, for a guard directory whose holder
// keeps a lock, that lock is free. Only what this implementation puts in
// such an entry (holder.json) is removed with it: a directory holding
// anything else is left alone.
func (b *Backend) sweepLocked(kind string) int {
	entries, err := os.ReadDir(b.dir)
	if err != nil {
		return 0
	}
	removed := 0
	for _, e := range entries {
		name := e.Name()
		if !b.isTemporary(name, kind) {
			continue
		}
		p := filepath.Join(b.dir, name)
		fi, err := os.Lstat(p)
		if err != nil || time.Since(fi.ModTime()) < b.guard.stale {
			continue
		}
		switch {
		case fi.Mode().IsRegular() && strings.HasPrefix(name, ".tmp-"):
			if unlinkFile(p) == nil {
				removed++
			}
		case fi.IsDir() && strings.HasPrefix(name, ".guard-"):
			if b.removeDeadGuardDir(p) {
				removed++
			}
		}
	}
	return removed
}

func (b *Backend) isTemporary(name, kind string) bool {
	if rest, ok := strings.CutPrefix(name, ".tmp-"); ok {
		return kind == "" || strings.HasPrefix(rest, kind+"-")
	}
	rest, ok := strings.CutPrefix(name, ".guard-")
	if !ok {
		return false
	}
	for _, infix := range temporaryKinds {
		if i := strings.LastIndex(rest, infix); i > 0 && (kind == "" || rest[:i] == kind) {
			return true
		}
	}
	return false
}

// removeDeadGuardDir removes a temporary guard directory, with its
// holder.json, only when that holder says it keeps a lock and the lock is
// free (or there is no holder file at all). A holder that keeps no lock (an
// older version of this tool, the Node tool) cannot be proven dead here,
// and the directory may be the live guard of a kind whose name looks like
// a temporary: it is left to the guard's own judgement and recovery.
func (b *Backend) removeDeadGuardDir(dir string) bool {
	hf := filepath.Join(dir, holderFile)
	f, data, err := openHolderFile(hf)
	if err == nil {
		h := parseHolder(data)
		lerr := flockRetry(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		f.Close()
		if h == nil || !h.Lock || !sameHost(h) || lerr != nil {
			return false // not provably dead
		}
		if unlinkFile(hf) != nil {
			return false
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	return removeDir(dir) == nil
}
