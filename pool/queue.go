package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// queue returns the live queue, first first, without a lock.
func (p *Pool) queue(ctx context.Context) ([]Entry, error) {
	live, _, err := p.backend.Queue(ctx)
	return live, err
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

// position is the Position of the entry id at index idx of the live
// queue, with its ETA (see etaModel.eta).
func (p *Pool) position(ctx context.Context, id string, idx int) Position {
	return p.model(ctx, nil).position(id, idx)
}

// enqueue appends a new entry for owner at the tail of the live queue.
func (p *Pool) enqueue(ctx context.Context, owner, session, mode string) (Entry, Position, error) {
	p.sweep(ctx, owner)
	p.backend.SweepGrants(ctx, grantMaxAge)
	ts := p.stamp()
	e := Entry{ID: newID(), Owner: owner, Session: session, Mode: mode, EnqueuedAt: ts, Heartbeat: ts}
	idx := 0
	join := func(live []Entry) ([]Entry, error) {
		idx = len(live)
		return append(live, e), nil
	}
	dropped, err := p.backend.UpdateQueue(ctx, owner, join)
	for errors.Is(err, ErrQueueBusy) && ctx.Err() == nil {
		fmt.Fprintf(p.log, "pool: %v; still trying to join the queue\n", err)
		dropped, err = p.backend.UpdateQueue(ctx, owner, join)
	}
	if err != nil {
		return e, Position{}, err
	}
	p.logDropped(ctx, dropped)
	return e, p.position(ctx, e.ID, idx), nil
}

// logDropped journals queue entries removed because their waiter went silent.
func (p *Pool) logDropped(ctx context.Context, stale []Entry) {
	for _, e := range stale {
		p.logEvent(ctx, EventQueueEntryDroppedStale, map[string]any{"entry": e})
	}
}

// heartbeatEntry refreshes a waiter's entry and returns its position and
// the entry's stamp in the queue now, or ErrQueueEntryLost when the entry
// is gone. Another owner's entry is refused (lease.ErrNotOwner) and the
// queue left as it was.
func (p *Pool) heartbeatEntry(ctx context.Context, id, owner string) (Position, time.Time, error) {
	if t, ok := p.backend.(EntryToucher); ok {
		if pos, at, ok := p.touchEntry(ctx, t, id, owner); ok {
			return pos, at, nil
		}
	}
	idx := -1
	var stamped time.Time
	dropped, err := p.backend.UpdateQueue(ctx, owner, func(live []Entry) ([]Entry, error) {
		idx = slices.IndexFunc(live, func(e Entry) bool { return e.ID == id })
		if idx >= 0 {
			if err := ownedBy(live[idx], owner, "heartbeat it"); err != nil {
				return nil, err
			}
			stamped = p.now()
			live[idx].Heartbeat = lease.FormatTime(stamped)
		}
		return live, nil
	})
	if err != nil {
		return Position{}, time.Time{}, err
	}
	p.logDropped(ctx, dropped)
	if idx < 0 {
		return Position{}, time.Time{}, fmt.Errorf("%w: request %s was dropped after %s without a poll; acquire again", ErrQueueEntryLost, id, p.cfg.WaiterStale)
	}
	return p.position(ctx, id, idx), stamped, nil
}

// touchOnly is a waiter's heartbeat that touches its entry and nothing
// else: on an [entryToucher], while the entry's stamp in the queue, as far
// as the waiter knows (stamped), is younger than rewriteAge.
func (p *Pool) touchOnly(id string, stamped time.Time) bool {
	t, ok := p.backend.(EntryToucher)
	now := p.now()
	return ok && now.Sub(stamped) < p.rewriteAge() && t.TouchEntry(id, now)
}

// touchEntry is the heartbeat of entry id on an entryToucher: a touch,
// and one read of the queue without the lock. It does not do (false) when
// the entry's heartbeat in the queue is rewriteAge old or more
// (so that a reader of the queue alone, the Node tool, never finds it
// stale), or when the entry is not found or not owner's: the rewrite then
// refreshes it, or reports what is wrong.
func (p *Pool) touchEntry(ctx context.Context, t EntryToucher, id, owner string) (Position, time.Time, bool) {
	now := p.now()
	if !t.TouchEntry(id, now) {
		return Position{}, time.Time{}, false
	}
	live, err := p.queue(ctx)
	if err != nil {
		return Position{}, time.Time{}, false
	}
	idx := slices.IndexFunc(live, func(e Entry) bool { return e.ID == id })
	if idx < 0 || live[idx].Owner != owner {
		return Position{}, time.Time{}, false
	}
	hb, err := lease.ParseTime(live[idx].Heartbeat)
	if err != nil || now.Sub(hb) >= p.rewriteAge() {
		return Position{}, time.Time{}, false
	}
	return p.position(ctx, id, idx), hb, true
}

// dequeue removes an entry (granted, timed out or given up). Another
// owner's entry is refused (lease.ErrNotOwner) and the queue left as it
// was.
func (p *Pool) dequeue(ctx context.Context, id, owner string) error {
	dropped, err := p.backend.UpdateQueue(ctx, owner, func(live []Entry) ([]Entry, error) {
		if i := slices.IndexFunc(live, func(e Entry) bool { return e.ID == id }); i >= 0 {
			if err := ownedBy(live[i], owner, "take it out of the queue"); err != nil {
				return nil, err
			}
		}
		return slices.DeleteFunc(live, func(e Entry) bool { return e.ID == id }), nil
	})
	p.logDropped(ctx, dropped)
	return err
}

// sweepAgain is how soon after a sweep of this process a grant attempt
// sweeps again: the enqueue that comes before the first attempt has just
// read every slot, and a holder found dead a moment later is reaped by the
// next attempt.
const sweepAgain = 250 * time.Millisecond

// sweepIfStale sweeps unless this process swept within sweepAgain.
func (p *Pool) sweepIfStale(ctx context.Context, owner string) {
	if time.Since(time.Unix(0, p.swept.Load())) >= sweepAgain {
		p.sweep(ctx, owner)
	}
}

// Swept reports what a sweep removed.
type Swept struct {
	ReapedSlots    []ReapedSlot `json:"reapedSlots"`
	DroppedEntries []Entry      `json:"droppedEntries"`
	// Probed are the slots a probe checked (none when no probe was due).
	Probed []Probed `json:"probed,omitempty"`
}

// ReapedSlot is a slot lease removed because its holder stopped beating.
type ReapedSlot struct {
	Slot          any    `json:"slot"`
	PreviousOwner string `json:"previousOwner"`
}

// sweep is the lazy maintenance every operation runs first: reap slot leases
// past their TTL and drop queue entries whose waiter went silent. It is
// best effort: a failure is logged, not returned. (Old grants are deleted
// by enqueue and pump, not on every waiter's wake-up: a directory scan
// would grow with the number of grants.)
func (p *Pool) sweep(ctx context.Context, owner string) Swept {
	p.swept.Store(time.Now().UnixNano())
	sw := Swept{ReapedSlots: []ReapedSlot{}, DroppedEntries: []Entry{}}
	for _, s := range p.cfg.Slots {
		st, err := p.store.Peek(ctx, s.Kind)
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
		p.logEvent(ctx, EventSlotReaped, map[string]any{"slot_id": s.RawID, "previous": prev})
	}
	if _, stale, err := p.backend.Queue(ctx); err == nil && stale > 0 {
		dropped, err := p.backend.UpdateQueue(ctx, owner, func(live []Entry) ([]Entry, error) { return live, nil })
		if err != nil {
			fmt.Fprintf(p.log, "pool: dropping silent waiters: %v\n", err)
		}
		sw.DroppedEntries = append(sw.DroppedEntries, dropped...)
		p.logDropped(ctx, dropped)
	}
	return sw
}
