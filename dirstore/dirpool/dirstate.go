package dirpool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/internal/storefile"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

type queueDoc struct {
	Entries []pool.Entry `json:"entries"`
}

type statsDoc struct {
	DurationsMs []float64 `json:"durationsMs"`
}

// maxStateBytes bounds what is read of a queue, statistics or grant file:
// a queue of thousands of waiters fits many times over.
const maxStateBytes = 4 << 20

// dirState is a pool's [pool.Backend] on a directory store: the files of
// <store>/<name>/ (docs/PROTOCOL.md §6), shared with the Node tool. The
// queue and the statistics are JSON documents replaced by rename under
// the queue lock (a lease of the pool's queueLockKind); grants are one
// file each under grants/; the log and the nudges are JSON lines appended
// with one write each. Waiters are woken by inotify (fsnotify off Linux).
type dirState struct {
	cfg *pool.Config
	h   pool.Host // the pool's store and clock, its judge of waiters, its log
	dir string
}

func (d *dirState) Where() string { return d.dir }

// Dir is the pool's state directory, <store>/<name>.
func (d *dirState) Dir() string { return d.dir }

func (d *dirState) queuePath() string { return filepath.Join(d.dir, pool.QueueFile) }

func (d *dirState) statsPath() string { return filepath.Join(d.dir, pool.StatsFile) }

func (d *dirState) grantPath(requestID string) string {
	return filepath.Join(d.dir, pool.GrantsDir, requestID+".json")
}

// entries reads queue.json without the lock; writes are atomic renames,
// so it is always a whole queue. A missing or unreadable queue is empty:
// it is advisory and rebuilds itself from the waiters' heartbeats.
func (d *dirState) entries() []pool.Entry {
	q := queueDoc{}
	d.readJSON(d.queuePath(), &q)
	return q.Entries
}

func (d *dirState) Queue(context.Context) ([]pool.Entry, int, error) {
	live, stale := d.h.Live(d.entries())
	return live, len(stale), nil
}

func (d *dirState) UpdateQueue(ctx context.Context, owner string, fn func([]pool.Entry) ([]pool.Entry, error)) ([]pool.Entry, error) {
	var dropped []pool.Entry
	var ring []string
	err := d.withQueueLock(ctx, owner, func() error {
		all := d.entries()
		d.refreshBeats(all, d.cfg.WaiterStale) // before judging: a waiter that touched its bell is alive
		live, stale := d.h.Live(all)
		next, err := fn(slices.Clone(live))
		if err != nil {
			return err
		}
		if len(stale) == 0 && slices.Equal(next, live) {
			return nil
		}
		if next == nil {
			next = []pool.Entry{} // never null in queue.json
		}
		d.refreshBeats(next, d.cfg.WaiterStale/8)
		if err := d.writeJSON(d.queuePath(), queueDoc{Entries: next}); err != nil {
			return err
		}
		dropped = stale
		ring = toRing(all, next, len(d.cfg.Slots)+pool.FrontMargin)
		return nil
	})
	// After the lock: a woken waiter reads the queue at once.
	for _, id := range ring {
		d.ring(id)
	}
	for _, e := range dropped {
		d.removeBell(e.ID)
	}
	return dropped, err
}

func (d *dirState) Holds(context.Context) ([]float64, error) {
	st := statsDoc{DurationsMs: []float64{}}
	d.readJSON(d.statsPath(), &st)
	return st.DurationsMs, nil
}

func (d *dirState) AddHold(ctx context.Context, owner string, ms float64, keep int) error {
	return d.withQueueLock(ctx, owner, func() error {
		st := statsDoc{DurationsMs: []float64{}}
		d.readJSON(d.statsPath(), &st)
		st.DurationsMs = append(st.DurationsMs, ms)
		if n := len(st.DurationsMs); n > keep {
			st.DurationsMs = st.DurationsMs[n-keep:]
		}
		return d.writeJSON(d.statsPath(), st)
	})
}

func (d *dirState) PutGrant(_ context.Context, id string, doc []byte) error {
	perm, err := d.ensureDir(filepath.Join(d.dir, pool.GrantsDir))
	if err != nil {
		return err
	}
	return storefile.Replace(d.grantPath(id), ".tmp-"+lease.RandomHex(16), doc, perm)
}

func (d *dirState) Grant(_ context.Context, id string) ([]byte, error) {
	data, err := storefile.Read(d.grantPath(id), maxStateBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// SweepGrants deletes grant files older than maxAge: only regular files
// named as grants are, in a grants directory that is not a symlink.
func (d *dirState) SweepGrants(_ context.Context, maxAge time.Duration) {
	dir := filepath.Join(d.dir, pool.GrantsDir)
	if !storefile.IsDir(d.dir) || !storefile.IsDir(dir) {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	now := d.h.Store.Now()
	for _, e := range entries {
		id, isJSON := strings.CutSuffix(e.Name(), ".json")
		if !e.Type().IsRegular() || !isJSON || pool.CheckRequestID(id) != nil {
			continue
		}
		if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > maxAge {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// logRotateBytes is the size at which pool.log is rotated: renamed to
// pool.log.1 (replacing the older one) before the next append, so the
// log of a pool used for years stays under about twice this. Appenders
// that opened the old file a moment before finish their line there.
const logRotateBytes = 4 << 20

func (d *dirState) AppendLog(_ context.Context, line []byte) error {
	path := filepath.Join(d.dir, pool.LogFile)
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() && fi.Size() >= logRotateBytes {
		if err := os.Rename(path, path+rotatedSuffix); err != nil {
			fmt.Fprintf(d.h.Log, "pool: rotating %s: %v\n", path, err)
		}
	}
	return d.appendLine(path, line)
}

// rotatedSuffix names the older generation of pool.log.
const rotatedSuffix = ".1"

func (d *dirState) AppendNudge(_ context.Context, line []byte) error {
	return d.appendLine(filepath.Join(d.dir, pool.NudgesFile), line)
}

// maxLogBytes bounds what is read of pool.log.
const maxLogBytes = 64 << 20

// Log reads pool.log.1, then pool.log. A generation larger than
// maxLogBytes (a log the Node tool, which never rotates it, let grow) is
// read from its last maxLogBytes on. An older generation that cannot be
// read (planted as a symlink, say) is left out with a warning: what the
// log is read for (history, a slot's failures in a row) must not stop
// working until the next rotation.
func (d *dirState) Log(context.Context) ([][]byte, error) {
	var lines [][]byte
	for _, name := range []string{pool.LogFile + rotatedSuffix, pool.LogFile} {
		path := filepath.Join(d.dir, name)
		data, err := storefile.Read(path, maxLogBytes)
		if errors.Is(err, storefile.ErrTooLarge) {
			data, err = readTail(path, maxLogBytes)
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil && name != pool.LogFile:
			fmt.Fprintf(d.h.Log, "pool: reading the log: %v (left out)\n", err)
			continue
		case err != nil:
			return nil, err
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				lines = append(lines, []byte(line))
			}
		}
	}
	return lines, nil
}

// readJSON decodes path into v. A missing or unreadable file leaves v as it
// is: the queue and the statistics are advisory and rebuild themselves.
func (d *dirState) readJSON(path string, v any) {
	data, err := storefile.Read(path, maxStateBytes)
	if err != nil {
		return
	}
	_ = json.Unmarshal(data, v)
}

// writeJSON replaces path atomically (a temporary file renamed over it).
func (d *dirState) writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	perm, err := d.ensureDir(filepath.Dir(path))
	if err != nil {
		return err
	}
	return storefile.Replace(path, ".tmp-"+lease.RandomHex(16), append(data, '\n'), perm)
}

// ensureDir makes sure dir, the pool's directory or one under it, is a
// real directory, so nothing written there lands outside the store; the
// store's directory is made first if missing, and judged safe
// (the directory store's EnsureDir). It returns the store's permission set, for
// what is then written there.
func (d *dirState) ensureDir(dir string) (storefile.Perm, error) {
	ens, ok := d.h.Store.Backend().(interface{ EnsureDir() (bool, error) })
	if !ok {
		return storefile.Private, fmt.Errorf("pool: the store %s is not a directory", d.h.Store.Where())
	}
	group, err := ens.EnsureDir()
	if err != nil {
		return storefile.Private, err
	}
	perm := storefile.Private
	if group {
		perm = storefile.Group
	}
	if dir != d.dir {
		if err := storefile.Dir(d.dir, perm); err != nil {
			return perm, err
		}
	}
	return perm, storefile.Dir(dir, perm)
}

// appendLine appends one line with a single write to a file of the pool's
// directory.
func (d *dirState) appendLine(path string, line []byte) error {
	perm, err := d.ensureDir(filepath.Dir(path))
	if err != nil {
		return err
	}
	return storefile.Append(path, append(line[:len(line):len(line)], '\n'), perm)
}

// queueLockTTLMinutes is the TTL of the queue lock lease. A hold lasts
// milliseconds; 15 s lets a lock left by a killed process be taken over
// well within queueLockWait.
const queueLockTTLMinutes = 0.25

// queueLockWait bounds one wait for the queue lock. A waiter that hits it
// keeps waiting in the queue (it only means many waiters); joining the
// queue retries until the caller's context ends.
const queueLockWait = 20 * time.Second

// withQueueLock runs fn holding the pool's queue lock: a lease of kind
// QueueLockKind, so queue and statistics mutations are serialized by the
// same primitive as everything else, and shared with other implementations.
func (d *dirState) withQueueLock(ctx context.Context, owner string, fn func() error) error {
	lctx, cancel := context.WithTimeout(ctx, queueLockWait)
	unlock, err := d.lockLocal(lctx)
	cancel()
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("%w: waited %s for the other processes of this host", pool.ErrQueueBusy, queueLockWait)
	}
	if err != nil {
		return err
	}
	defer unlock()
	// The payload names this process, so that if it dies holding the lock
	// the next process can prove it and take the lock at once instead of
	// after its TTL.
	self, _ := json.Marshal(lockHolder{Process: lease.Self(), DirLock: d.dir})
	req := lease.Request{Kind: d.cfg.QueueLockKind, Owner: owner, TTLMinutes: queueLockTTLMinutes, Payload: self}
	acq, err := d.h.Store.Acquire(ctx, req)
	if rec := lease.LiveRecord(err); rec != nil && d.recoverDeadLock(ctx, rec) {
		acq, err = d.h.Store.Acquire(ctx, req)
	}
	if errors.Is(err, lease.ErrHeld) {
		wctx, cancel := context.WithTimeout(ctx, queueLockWait)
		acq, err = d.h.Store.AcquireWait(wctx, req)
		cancel()
		if errors.Is(err, lease.ErrTimeout) {
			return fmt.Errorf("%w: %v", pool.ErrQueueBusy, err)
		}
	}
	if err != nil {
		return err
	}
	defer func() {
		if _, err := d.h.Store.Release(context.WithoutCancel(ctx), lease.Ref{Kind: req.Kind, Owner: owner, Token: acq.Record.Token}); err != nil {
			fmt.Fprintf(d.h.Log, "pool: releasing the queue lock: %v\n", err)
		}
	}()
	return fn()
}

// lockHolder is the queue lock's payload: the process holding it, and the
// pool directory whose flock (on the directory itself) it took first.
// Versions that took a flock on a file in the directory (.queue.flock)
// wrote that directory as "pool"; holding the directory's flock proves
// nothing about such a holder, so "pool" is not read, and those holders
// are recovered only when provably dead.
type lockHolder struct {
	lease.Process
	DirLock string `json:"dirLock,omitempty"`
}

// recoverDeadLock releases a queue lock held for a process that can no
// longer hold it, proven in one of two ways. If the payload names this
// pool's directory as its dirLock, the holder is a process of this
// implementation that took the flock on this pool's directory before the
// lock and lets go of it only after releasing the lock; we hold that flock
// now, so the holder has died inside its hold. (The kernel drops a killed
// process's flock at once, while /proc may show it running a moment
// longer, so the flock is the better proof.) Otherwise the named process
// must have provably exited. The release is fenced by the dead holder's
// token, so a lock taken over meanwhile is left alone. A lock whose
// payload names no process (the Node tool's) waits for its TTL.
func (d *dirState) recoverDeadLock(ctx context.Context, rec *lease.Record) bool {
	var holder lockHolder
	if json.Unmarshal(rec.Payload, &holder) != nil || holder.PID == 0 {
		return false
	}
	me := lease.Self()
	sameHost := holder.Host == me.Host && holder.Boot == me.Boot && holder.PIDNS == me.PIDNS
	if !(holder.DirLock == d.dir && sameHost) && !holder.Dead() {
		return false
	}
	if _, err := d.h.Store.Release(ctx, rec.Ref()); err != nil {
		return false
	}
	d.h.Event(ctx, pool.EventQueueLockRecovered, map[string]any{"owner": rec.Owner, "pid": holder.PID})
	return true
}
