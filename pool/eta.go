package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// etaModel is what an ETA is computed from: the moving average of hold
// times and, for each usable (not quarantined) slot, when it is expected
// to free. It depends on the clock only through how long each slot has
// been held, and only so as to grow with it: while nothing moves (no slot
// frees, nobody ahead leaves, no hold ends and changes the average), no
// ETA shrinks. A countdown would, and then sit at "<1s" for as long as
// the holders overstay.
type etaModel struct {
	avg time.Duration
	// free holds one value per usable slot, soonest first: the time from
	// now at which it is expected to free (see model).
	free []time.Duration
	// settled is the number of frees counted up to the last of free,
	// and cycle the frees of the next round of avg, soonest first: from
	// there on every slot frees once per avg (see eta).
	settled int64
	cycle   []int64
}

// model reads what the ETAs of the moment are computed from. slots are
// the slots' statuses when the caller has them already, else nil.
func (p *Pool) model(ctx context.Context, slots []SlotStatus) etaModel {
	if slots == nil {
		for _, s := range p.cfg.Slots {
			st, err := p.store.Peek(ctx, s.Kind)
			if err != nil {
				continue
			}
			slots = append(slots, p.slotStatus(s, st))
		}
	}
	avg := p.MovingAvg(ctx)
	now := p.now()
	var free []time.Duration
	for _, s := range slots {
		if s.Quarantine != nil {
			continue
		}
		if s.State != lease.Held {
			free = append(free, 0) // free, or dead and about to be reaped: its turn has come
			continue
		}
		// A holder is expected to hold a usual hold from now, or, once it
		// has held longer than that, as long again as it has held: never
		// less as time passes.
		held := time.Duration(0)
		if s.Record != nil && !s.Record.AcquiredAt.IsZero() {
			held = max(now.Sub(s.Record.AcquiredAt), 0)
		}
		free = append(free, max(avg, held))
	}
	return newEtaModel(avg, free)
}

// newEtaModel is the model of average hold avg and slots expected to free
// at free (in any order; none: one slot freeing in avg, so that the ETA is
// position × avg).
func newEtaModel(avg time.Duration, free []time.Duration) etaModel {
	m := etaModel{avg: max(avg, 0), free: slices.Clone(free)}
	if len(m.free) == 0 {
		m.free = []time.Duration{m.avg}
	}
	slices.Sort(m.free)
	a := m.avg.Milliseconds()
	if a <= 0 {
		return m
	}
	// Up to the latest first free, each slot frees once at its own time
	// and then once per avg; the next round of avg after it holds exactly
	// one free of each slot.
	last := m.free[len(m.free)-1].Milliseconds()
	for _, f := range m.free {
		n := (last-f.Milliseconds())/a + 1 // its frees up to last
		m.settled += n
		m.cycle = append(m.cycle, f.Milliseconds()+n*a)
	}
	slices.Sort(m.cycle)
	return m
}

// eta is the wait of the waiter at position pos (1 for the first): the
// pos-th soonest of the times at which a slot frees, each slot freeing
// first when the model expects it (a free slot now) and then once per
// average hold. With one slot held a moment that is pos × avg, the Node
// tool's ETA; with k slots the queue moves k at a time.
//
// It is computed in milliseconds and saturates at maxEtaMs, so no queue
// length or average (at most 366 days) overflows it or what renders it.
func (m etaModel) eta(pos int) int64 {
	pos = max(pos, 1)
	a := m.avg.Milliseconds()
	if a <= 0 {
		// Holds that take no time: the first slot to free frees again
		// at once.
		return min(m.free[0].Milliseconds(), maxEtaMs)
	}
	if int64(pos) > m.settled {
		q := int64(pos) - m.settled - 1
		k := int64(len(m.cycle))
		first, rounds := m.cycle[q%k], q/k
		if rounds > (maxEtaMs-first)/a {
			return maxEtaMs
		}
		return min(first+rounds*a, maxEtaMs)
	}
	// Among the first frees: the least time by which pos of them have
	// come.
	lo, hi := int64(0), m.free[len(m.free)-1].Milliseconds()
	for lo < hi {
		mid := lo + (hi-lo)/2
		if m.freedBy(mid) >= int64(pos) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return min(lo, maxEtaMs)
}

// freedBy is how many frees have come by t milliseconds from now.
func (m etaModel) freedBy(t int64) int64 {
	a, n := m.avg.Milliseconds(), int64(0)
	for _, f := range m.free {
		if f := f.Milliseconds(); f <= t {
			n += (t-f)/a + 1
		}
	}
	return n
}

// maxEtaMs is the longest ETA given: a hundred years.
const maxEtaMs = 100 * 365 * 24 * 3600 * 1000

func (m etaModel) position(id string, idx int) Position {
	return Position{RequestID: id, Position: idx + 1, EtaMs: m.eta(idx + 1), AvgMs: m.avg.Milliseconds()}
}

// slotStatus is a slot's status from its lease's.
func (p *Pool) slotStatus(s *Slot, st *lease.Status) SlotStatus {
	ss := SlotStatus{Slot: s, State: st.State, Record: st.Record}
	if st.Record != nil && !st.Record.Corrupt {
		ss.Holder = st.Record.Owner // for an unknown slot, the silent holder
	}
	if !st.ExpiresAt.IsZero() {
		ss.ExpiresAt = lease.FormatTime(st.ExpiresAt)
	}
	if st.State == lease.Held {
		ss.Quarantine = quarantineOf(st.Record)
	}
	return ss
}

// quarantineOf returns the quarantine a slot lease's payload describes,
// or nil when the lease is an ordinary grant.
func quarantineOf(rec *lease.Record) *Quarantine {
	if rec == nil || rec.Corrupt || len(rec.Payload) == 0 {
		return nil
	}
	var pl struct {
		Quarantine *Quarantine `json:"quarantine"`
	}
	if json.Unmarshal(rec.Payload, &pl) != nil {
		return nil
	}
	return pl.Quarantine
}

// EtaText renders an ETA for people: seconds under a minute ("~40s"),
// minutes under an hour ("~12m"), else hours and minutes ("~2h05m").
// The JSON "eta" field says the same ([FormatEta]).
func EtaText(ms int64) string {
	secs := (max(ms, 0) + 500) / 1000
	switch mins := (secs + 30) / 60; {
	case secs < 1:
		return "<1s"
	case secs < 60:
		return fmt.Sprintf("~%ds", secs)
	case mins < 60:
		return fmt.Sprintf("~%dm", mins)
	default:
		return fmt.Sprintf("~%dh%02dm", mins/60, mins%60)
	}
}
