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
	"sync"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/storefile"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

type queueDoc struct {
	Entries []pool.Entry `json:"entries"`
}

type statsDoc struct {
	DurationsMs []float64 `json:"durationsMs"`
}

// maxStateBytes bounds a queue, statistics or grant file, written or
// read: a queue of about 16 000 waiters fits. A file over it is never
// taken for an empty one (PROTOCOL §1, §6.1): reading it fails, naming the
// file and the bound, and nothing replaces it; a write that would make
// one fails the same way.
var maxStateBytes = 4 << 20 // a variable only so that the tests can make it small (TestMain)

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
	// tailSaid says, once, that a log generation over maxLogBytes is read
	// from its end.
	tailSaid sync.Once
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
// so it is always a whole queue. A missing queue is empty, and so is one
// that cannot be read as a queue (not JSON, not a regular file: a torn
// write of a crashed writer that did not sync, a planted file), whose
// reason unreadable gives, for the writer that replaces it to journal. A
// queue over maxStateBytes is an error: it was not read, and taking it for
// an empty one would drop every entry in it at the next rewrite.
func (d *dirState) entries() (entries []pool.Entry, unreadable string, err error) {
	q := queueDoc{}
	unreadable, err = d.readState(d.queuePath(), &q)
	return q.Entries, unreadable, err
}

func (d *dirState) Queue(context.Context) ([]pool.Entry, int, error) {
	all, _, err := d.entries()
	if err != nil {
		return nil, 0, err
	}
	live, stale := d.h.Live(all)
	return live, len(stale), nil
}

func (d *dirState) UpdateQueue(ctx context.Context, owner string, fn func([]pool.Entry) ([]pool.Entry, error)) ([]pool.Entry, error) {
	var dropped []pool.Entry
	var ring []string
	err := d.withQueueLock(ctx, owner, func() error {
		all, unreadable, err := d.entries()
		if err != nil {
			return err
		}
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
		if unreadable != "" {
			d.replaced(ctx, pool.QueueFile, unreadable)
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
	_, err := d.readState(d.statsPath(), &st)
	if st.DurationsMs == nil {
		st.DurationsMs = []float64{}
	}
	return st.DurationsMs, err
}

func (d *dirState) AddHold(ctx context.Context, owner string, ms float64, keep int) error {
	return d.withQueueLock(ctx, owner, func() error {
		st := statsDoc{DurationsMs: []float64{}}
		unreadable, err := d.readState(d.statsPath(), &st)
		if err != nil {
			return err
		}
		st.DurationsMs = append(st.DurationsMs, ms)
		if n := len(st.DurationsMs); n > keep {
			st.DurationsMs = st.DurationsMs[n-keep:]
		}
		if err := d.writeJSON(d.statsPath(), st); err != nil {
			return err
		}
		if unreadable != "" {
			d.replaced(ctx, pool.StatsFile, unreadable)
		}
		return nil
	})
}

func (d *dirState) PutGrant(_ context.Context, id string, doc []byte) error {
	path := d.grantPath(id)
	if len(doc) > maxStateBytes {
		return tooLargeToWrite(path, len(doc))
	}
	perm, err := d.ensureDir(filepath.Join(d.dir, pool.GrantsDir))
	if err != nil {
		return err
	}
	return storefile.Replace(path, ".tmp-"+lease.RandomHex(16), doc, perm)
}

func (d *dirState) Grant(_ context.Context, id string) ([]byte, error) {
	path := d.grantPath(id)
	data, err := storefile.Read(path, maxStateBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if errors.Is(err, storefile.ErrTooLarge) {
		return nil, tooLargeToRead(path, err)
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
var logRotateBytes = 4 << 20 // a variable only so that the tests can make it small (TestMain)

func (d *dirState) AppendLog(_ context.Context, line []byte) error {
	path := filepath.Join(d.dir, pool.LogFile)
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() && fi.Size() >= int64(logRotateBytes) {
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
var maxLogBytes = 64 << 20 // a variable only so that the tests can make it small (TestMain)

// Log reads pool.log.1, then pool.log. A generation larger than
// maxLogBytes (a log the Node tool, which never rotates it, let grow) is
// read from its last maxLogBytes on, which the pool's log says once. An older generation that cannot be
// read (planted as a symlink, say) is left out with a warning: what the
// log is read for (history, a slot's failures in a row) must not stop
// working until the next rotation.
func (d *dirState) Log(context.Context) ([][]byte, error) {
	var lines [][]byte
	for _, name := range []string{pool.LogFile + rotatedSuffix, pool.LogFile} {
		path := filepath.Join(d.dir, name)
		data, err := storefile.Read(path, maxLogBytes)
		if errors.Is(err, storefile.ErrTooLarge) {
			var se *storefile.SizeError
			errors.As(err, &se)
			if data, err = readTail(path, int64(maxLogBytes)); err == nil && se != nil {
				d.tailSaid.Do(func() {
					fmt.Fprintf(d.h.Log, "pool: %s is %d bytes, over the %s read bound: only its last %s is read (history covers that)\n",
						path, se.Size, storefile.Bytes(maxLogBytes), storefile.Bytes(maxLogBytes))
				})
			}
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

// readState decodes the state file at path (queue.json, stats.json) into
// v. A missing file leaves v as it is. So does one that is there but is
// not v's JSON (not JSON, not an object, not a regular file), whose reason
// unreadable gives: these files are advisory and rebuild themselves, and
// the writer that replaces such a file journals it (see replaced). A file
// over maxStateBytes is an error naming it and the bound, for every
// reader and writer: it was not read, so it is not known to be empty.
func (d *dirState) readState(path string, v any) (unreadable string, err error) {
	data, err := storefile.Read(path, maxStateBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case errors.Is(err, storefile.ErrTooLarge):
		return "", tooLargeToRead(path, err)
	case errors.Is(err, storefile.ErrNotRegular):
		return errors.Unwrap(err).Error(), nil
	case err != nil:
		return "", err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Sprintf("%d bytes that are not its JSON (%v)", len(data), err), nil
	}
	return "", nil
}

// replaced journals that a writer replaced a state file it could not
// read (PROTOCOL §6.9, state_file_replaced): whatever it held is gone, and
// the log says so.
func (d *dirState) replaced(ctx context.Context, file, reason string) {
	d.h.Event(ctx, pool.EventStateFileReplaced, map[string]any{"file": file, "reason": reason})
}

// tooLargeError is a state file over maxStateBytes, read or about to be
// written; it matches storefile.ErrTooLarge (code too_large).
type tooLargeError string

func (e tooLargeError) Error() string        { return string(e) }
func (e tooLargeError) Is(target error) bool { return target == storefile.ErrTooLarge }

// tooLargeToRead is the error of a state file over maxStateBytes; err is
// storefile's, which says its size.
func tooLargeToRead(path string, err error) error {
	size := ""
	var se *storefile.SizeError
	if errors.As(err, &se) {
		size = fmt.Sprintf(" is %d bytes,", se.Size)
	}
	return tooLargeError(fmt.Sprintf("pool: %s%s over the %s bound on what is read of a pool's queue, statistics and grant files: "+
		"it was not read, and nothing was changed. No writer makes such a file: look at what wrote it, then move it aside "+
		"(a queue moved aside loses its waiters, who must queue again)", path, size, storefile.Bytes(maxStateBytes)))
}

// tooLargeToWrite is the error of a write that would make a state file of
// n bytes, over maxStateBytes.
func tooLargeToWrite(path string, n int) error {
	return tooLargeError(fmt.Sprintf("pool: %s would be %d bytes, over the %s bound on a pool's queue, statistics and grant files "+
		"that every reader holds to: nothing was written", path, n, storefile.Bytes(maxStateBytes)))
}

// writeJSON replaces path atomically (a temporary file renamed over it),
// with two-space indented JSON and a final newline. A document over
// maxStateBytes is refused: no reader would read it.
func (d *dirState) writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if len(data)+1 > maxStateBytes {
		return tooLargeToWrite(path, len(data)+1)
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
