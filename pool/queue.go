package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

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
func (p *Pool) withQueueLock(ctx context.Context, owner string, fn func() error) error {
	lctx, cancel := context.WithTimeout(ctx, queueLockWait)
	unlock, err := p.lockLocal(lctx)
	cancel()
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("%w: waited %s for the other processes of this host", ErrQueueBusy, queueLockWait)
	}
	if err != nil {
		return err
	}
	defer unlock()
	// The payload names this process, so that if it dies holding the lock
	// the next process can prove it and take the lock at once instead of
	// after its TTL.
	self, _ := json.Marshal(lockHolder{Process: lease.Self(), DirLock: p.dir})
	req := lease.Request{Kind: p.cfg.QueueLockKind, Owner: owner, TTLMinutes: queueLockTTLMinutes, Payload: self}
	acq, err := p.store.Acquire(ctx, req)
	if rec := lease.LiveRecord(err); rec != nil && p.recoverDeadLock(ctx, rec) {
		acq, err = p.store.Acquire(ctx, req)
	}
	if errors.Is(err, lease.ErrHeld) {
		wctx, cancel := context.WithTimeout(ctx, queueLockWait)
		acq, err = p.store.AcquireWait(wctx, req)
		cancel()
		if errors.Is(err, lease.ErrTimeout) {
			return fmt.Errorf("%w: %v", ErrQueueBusy, err)
		}
	}
	if err != nil {
		return err
	}
	defer func() {
		if _, err := p.store.Release(context.WithoutCancel(ctx), req.Kind, owner, acq.Record.Token); err != nil {
			fmt.Fprintf(p.log, "pool: releasing the queue lock: %v\n", err)
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
func (p *Pool) recoverDeadLock(ctx context.Context, rec *lease.Record) bool {
	var holder lockHolder
	if json.Unmarshal(rec.Payload, &holder) != nil || holder.PID == 0 {
		return false
	}
	me := lease.Self()
	sameHost := holder.Host == me.Host && holder.Boot == me.Boot && holder.PIDNS == me.PIDNS
	if !(holder.DirLock == p.dir && sameHost) && !holder.Dead() {
		return false
	}
	if _, err := p.store.Release(ctx, rec.Kind, rec.Owner, rec.Token); err != nil {
		return false
	}
	p.logEvent("queue_lock_recovered", map[string]any{"owner": rec.Owner, "pid": holder.PID})
	return true
}

func (p *Pool) queuePath() string { return filepath.Join(p.dir, QueueFile) }

// readQueue reads queue.json without the lock; writes are atomic renames,
// so it is always a whole queue.
func (p *Pool) readQueue() []Entry {
	q := queueDoc{}
	readJSON(p.queuePath(), &q)
	return q.Entries
}

// live splits entries into those whose waiter polled within the stale bound
// and those that went silent. An entry stamped further ahead of the clock
// than lease.MaxFuture allows for the stale bound is stale too (the clock
// rule of PROTOCOL §2.2): a planted or skewed stamp cannot keep a dead
// waiter at the head of the queue.
func (p *Pool) live(entries []Entry) (live, stale []Entry) {
	now := p.now()
	ahead := lease.MaxFuture(p.cfg.WaiterStale)
	live = make([]Entry, 0, len(entries)) // never null in queue.json
	for _, e := range entries {
		hb, err := lease.ParseTime(e.Heartbeat)
		if age := now.Sub(hb); err != nil || age > p.cfg.WaiterStale || -age > ahead {
			stale = append(stale, e)
		} else {
			live = append(live, e)
		}
	}
	return live, stale
}

// Position is a waiter's place in the queue.
type Position struct {
	RequestID string
	Position  int
	EtaMs     int64
	AvgMs     int64
}

func (p *Pool) position(id string, idx int) Position {
	avg := p.MovingAvg().Milliseconds()
	return Position{RequestID: id, Position: idx + 1, EtaMs: int64(idx+1) * avg, AvgMs: avg}
}

// enqueue appends a new entry for owner at the tail of the live queue.
func (p *Pool) enqueue(ctx context.Context, owner, session, mode string) (Entry, Position, error) {
	p.sweep(ctx, owner)
	p.sweepGrants()
	ts := p.stamp()
	e := Entry{ID: newID(), Owner: owner, Session: session, Mode: mode, EnqueuedAt: ts, Heartbeat: ts}
	var pos Position
	var stale []Entry
	join := func() error {
		var live []Entry
		live, stale = p.live(p.readQueue())
		live = append(live, e)
		pos = p.position(e.ID, len(live)-1)
		return p.writeJSON(p.queuePath(), queueDoc{Entries: live})
	}
	err := p.withQueueLock(ctx, owner, join)
	for errors.Is(err, ErrQueueBusy) && ctx.Err() == nil {
		fmt.Fprintf(p.log, "pool: %v; still trying to join the queue\n", err)
		err = p.withQueueLock(ctx, owner, join)
	}
	if err == nil {
		p.logDropped(stale)
	}
	return e, pos, err
}

// logDropped journals queue entries removed because their waiter went silent.
func (p *Pool) logDropped(stale []Entry) {
	for _, e := range stale {
		p.logEvent("queue_entry_dropped_stale", map[string]any{"entry": e})
	}
}

// heartbeatEntry refreshes a waiter's entry and returns its position, or
// ErrQueueEntryLost when the entry is gone.
func (p *Pool) heartbeatEntry(ctx context.Context, id, owner string) (Position, error) {
	var pos Position
	var dropped []Entry
	err := p.withQueueLock(ctx, owner, func() error {
		live, stale := p.live(p.readQueue())
		for i := range live {
			if live[i].ID == id {
				live[i].Heartbeat = p.stamp()
				pos = p.position(id, i)
				if err := p.writeJSON(p.queuePath(), queueDoc{Entries: live}); err != nil {
					return err
				}
				dropped = stale
				return nil
			}
		}
		if len(stale) > 0 && p.writeJSON(p.queuePath(), queueDoc{Entries: live}) == nil {
			dropped = stale
		}
		return fmt.Errorf("%w: request %s was dropped after %s without a poll; acquire again", ErrQueueEntryLost, id, p.cfg.WaiterStale)
	})
	p.logDropped(dropped)
	return pos, err
}

// dequeue removes an entry (granted, timed out or given up).
func (p *Pool) dequeue(ctx context.Context, id, owner string) error {
	return p.withQueueLock(ctx, owner, func() error {
		all := p.readQueue()
		kept := make([]Entry, 0, len(all))
		for _, e := range all {
			if e.ID != id {
				kept = append(kept, e)
			}
		}
		if len(kept) == len(all) {
			return nil
		}
		return p.writeJSON(p.queuePath(), queueDoc{Entries: kept})
	})
}

// Swept reports what a sweep removed.
type Swept struct {
	ReapedSlots    []ReapedSlot `json:"reapedSlots"`
	DroppedEntries []Entry      `json:"droppedEntries"`
}

// ReapedSlot is a slot lease removed because its holder stopped beating.
type ReapedSlot struct {
	Slot          any    `json:"slot"`
	PreviousOwner string `json:"previousOwner"`
}

// sweep is the lazy maintenance every operation runs first: reap slot leases
// past their TTL and drop queue entries whose waiter went silent. It is
// best effort: a failure is logged, not returned. (Old grant files are
// deleted by enqueue and pump, not on every waiter's wake-up: a directory
// scan would grow with the number of grants.)
func (p *Pool) sweep(ctx context.Context, owner string) Swept {
	sw := Swept{ReapedSlots: []ReapedSlot{}, DroppedEntries: []Entry{}}
	for _, s := range p.cfg.Slots {
		st, err := p.store.Status(ctx, s.Kind)
		if err != nil || st.State != lease.Unknown {
			continue
		}
		prev, err := p.store.Reap(ctx, s.Kind)
		if err != nil || prev == nil {
			continue
		}
		r := ReapedSlot{Slot: s.RawID}
		if !prev.Corrupt {
			r.PreviousOwner = prev.Owner
		}
		sw.ReapedSlots = append(sw.ReapedSlots, r)
		p.logEvent("slot_reaped", map[string]any{"slot_id": s.RawID, "previous": prev})
	}
	if _, stale := p.live(p.readQueue()); len(stale) > 0 {
		err := p.withQueueLock(ctx, owner, func() error {
			live, stale := p.live(p.readQueue())
			if len(stale) == 0 {
				return nil
			}
			if err := p.writeJSON(p.queuePath(), queueDoc{Entries: live}); err != nil {
				return err
			}
			sw.DroppedEntries = append(sw.DroppedEntries, stale...)
			return nil
		})
		if err != nil {
			fmt.Fprintf(p.log, "pool: dropping silent waiters: %v\n", err)
		}
		p.logDropped(sw.DroppedEntries)
	}
	return sw
}
