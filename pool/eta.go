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
// times, the number of usable (not quarantined) slots, and how long each
// of them has been held so far.
type etaModel struct {
	avg time.Duration
	// elapsed has one value per usable slot, longest first: how long its
	// current holder has held it, capped at 9/10 of avg; a free slot counts as
	// avg (its turn has come).
	elapsed []time.Duration
}

// model reads what the ETAs of the moment are computed from. slots are
// the slots' statuses when the caller has them already, else nil.
func (p *Pool) model(ctx context.Context, slots []SlotStatus) etaModel {
	m := etaModel{avg: p.MovingAvg(ctx)}
	if slots == nil {
		for _, s := range p.cfg.Slots {
			st, err := p.store.Peek(ctx, s.Kind)
			if err != nil {
				continue
			}
			slots = append(slots, p.slotStatus(s, st))
		}
	}
	now := p.now()
	for _, s := range slots {
		if s.Quarantine != nil {
			continue
		}
		held := m.avg
		if s.State == lease.Held && s.Record != nil && !s.Record.AcquiredAt.IsZero() {
			// A holder past the average still holds the slot: it is taken
			// to have a tenth of a hold left, not to be done already.
			held = min(max(now.Sub(s.Record.AcquiredAt), 0), m.avg-m.avg/10)
		}
		m.elapsed = append(m.elapsed, held)
	}
	slices.SortFunc(m.elapsed, func(a, b time.Duration) int { return int(b - a) })
	return m
}

// eta is the wait of the waiter at position pos (1 for the first):
//
//	rounds = ceil(pos / k)           k usable slots (at least 1)
//	j      = pos - (rounds-1)·k      its place within its round
//	eta    = rounds·avg - elapsed_j  elapsed_j: the j-th longest time a
//	                                 usable slot has been held, capped at
//	                                 9/10 of avg (a free slot: avg)
//
// never below zero. With one slot and nobody holding it long, that is
// position × avg, the Node tool's ETA; with k slots the queue moves k
// times as fast, and a slot held for a while already frees sooner.
//
// It is computed in milliseconds and saturates at maxEtaMs, so no queue
// length or average (at most 366 days) overflows it or what renders it.
func (m etaModel) eta(pos int) int64 {
	k := max(len(m.elapsed), 1)
	rounds := int64((pos + k - 1) / k)
	j := pos - int(rounds-1)*k
	var elapsed int64
	if j >= 1 && j <= len(m.elapsed) {
		elapsed = m.elapsed[j-1].Milliseconds()
	}
	avg := m.avg.Milliseconds()
	if avg > 0 && rounds > (maxEtaMs+elapsed)/avg {
		return maxEtaMs
	}
	return min(max(rounds*avg-elapsed, 0), maxEtaMs)
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
