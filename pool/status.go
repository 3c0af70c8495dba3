package pool

import (
	"context"
	"encoding/json"

	"github.com/durable-lease/durable-lease/lease"
)

// SlotStatus is one slot as status reports it.
type SlotStatus struct {
	Slot      *Slot
	State     lease.State
	Holder    string
	ExpiresAt string
	Record    *lease.Record
	// Quarantine is set when the slot is out of rotation (its lease is
	// held by a quarantine; see [Pool.Quarantine]).
	Quarantine *Quarantine
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
	out := &Status{Store: p.store.Where(), Dir: p.backend.Where()}
	for _, s := range p.cfg.Slots {
		st, err := p.store.Status(ctx, s.Kind)
		if err != nil {
			return nil, err
		}
		out.Slots = append(out.Slots, p.slotStatus(s, st))
	}
	live, err := p.queue(ctx)
	if err != nil {
		return nil, err
	}
	m := p.model(ctx, out.Slots)
	out.MovingAvgMs = m.avg.Milliseconds()
	for i, e := range live {
		out.Queue = append(out.Queue, QueuedEntry{Entry: e, Position: m.position(e.ID, i)})
	}
	return out, nil
}

// Pump is one maintenance pass, the same sweep every operation runs
// lazily: for a broker session that wants active reaping. With a probe
// interval in the pool file, it also health-checks the free slots when the
// last probe is that old (see probe).
func (p *Pool) Pump(ctx context.Context, owner string) (Swept, error) {
	if err := p.checkOwner(owner); err != nil {
		return Swept{}, err
	}
	sw := p.sweep(ctx, owner)
	p.backend.SweepGrants(ctx, grantMaxAge)
	sw.Probed = p.probe(ctx, owner)
	return sw, nil
}

// Log returns the pool's log, oldest first: one JSON object an event,
// each with "at" and "event". Lines that are not JSON objects (a torn
// line of a crashed writer) are left out.
func (p *Pool) Log(ctx context.Context) ([]json.RawMessage, error) {
	lines, err := p.backend.Log(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, 0, len(lines))
	for _, l := range lines {
		var obj map[string]json.RawMessage
		if json.Unmarshal(l, &obj) == nil && obj != nil {
			out = append(out, json.RawMessage(l))
		}
	}
	return out, nil
}

// Watch returns wake-ups for someone following the pool (a live view):
// Slots after a slot may have been freed, Queue after the queue changed.
// stop ends them. Without change notifications the channels stay silent.
func (p *Pool) Watch(ctx context.Context) (Wakeups, func()) {
	return p.backend.Watch(ctx, p.slotKinds())
}
