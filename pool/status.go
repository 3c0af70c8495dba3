package pool

import (
	"context"
	"path/filepath"

	"github.com/durable-lease/durable-lease/lease"
)

func (p *Pool) statsPath() string { return filepath.Join(p.dir, StatsFile) }

// SlotStatus is one slot as status reports it.
type SlotStatus struct {
	Slot      *Slot
	State     lease.State
	Holder    string
	ExpiresAt string
	Record    *lease.Record
}

// Status is a lock-free overview of the pool.
type Status struct {
	Store       string
	Dir         string
	Slots       []SlotStatus
	Queue       []QueuedEntry
	MovingAvgMs int64
}

// QueuedEntry is a live queue entry with its position.
type QueuedEntry struct {
	Entry
	Position
}

// Status reads the pool without taking any lock.
func (p *Pool) Status(ctx context.Context) (*Status, error) {
	out := &Status{Store: p.store.Dir(), Dir: p.dir, MovingAvgMs: p.MovingAvg().Milliseconds()}
	for _, s := range p.cfg.Slots {
		st, err := p.store.Status(ctx, s.Kind)
		if err != nil {
			return nil, err
		}
		ss := SlotStatus{Slot: s, State: st.State, Record: st.Record}
		if st.Record != nil && !st.Record.Corrupt {
			ss.Holder = st.Record.Owner // for an unknown slot, the silent holder
		}
		if !st.ExpiresAt.IsZero() {
			ss.ExpiresAt = lease.FormatTime(st.ExpiresAt)
		}
		out.Slots = append(out.Slots, ss)
	}
	live, _ := p.live(p.readQueue())
	avg := out.MovingAvgMs
	for i, e := range live {
		out.Queue = append(out.Queue, QueuedEntry{Entry: e, Position: Position{RequestID: e.ID, Position: i + 1, EtaMs: int64(i+1) * avg, AvgMs: avg}})
	}
	return out, nil
}

// Pump is one maintenance pass, the same sweep every operation runs
// lazily: for a broker session that wants active reaping.
func (p *Pool) Pump(ctx context.Context, owner string) (Swept, error) {
	if err := p.checkOwner(owner); err != nil {
		return Swept{}, err
	}
	sw := p.sweep(ctx, owner)
	p.sweepGrants()
	return sw, nil
}
