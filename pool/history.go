package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// HistoryOptions choose what [Pool.History] covers.
type HistoryOptions struct {
	// Slot limits it to one slot (its id); "" is every slot.
	Slot string
	// Since limits it to the events of the last Since; 0 is the whole log.
	Since time.Duration
}

// History is what the pool's log says about its slots over a window.
type History struct {
	// From and Until bound the window (From: Since ago, or the log's
	// first event; Until: now).
	From, Until time.Time
	Slots       []SlotHistory
	// All sums every slot of Slots (its Slot is nil).
	All SlotHistory
	// Events are the window's events of the slots covered, oldest first.
	Events []HistoryEvent
}

// SlotHistory is one slot's figures over the window. Durations are in
// milliseconds; a median or percentile is nil when there is nothing to
// take it of.
type SlotHistory struct {
	Slot any `json:"slot"`
	// Grants counts grants; Releases, Reaps and Takeovers how holds ended.
	Grants    int `json:"grants"`
	Releases  int `json:"releases"`
	Reaps     int `json:"reaps"`
	Takeovers int `json:"takeovers"`
	// Failures counts failed provisions, resets, health checks and probes.
	Failures    int `json:"failures"`
	Quarantines int `json:"quarantines"`
	// HeldMs is the time the slot was held within the window (a hold
	// still going counts until now), Utilisation that over the window.
	HeldMs      int64   `json:"heldMs"`
	Utilisation float64 `json:"utilisation"`
	// Hold figures are of holds that ended in the window.
	HoldMedianMs *int64 `json:"holdMedianMs"`
	HoldP90Ms    *int64 `json:"holdP90Ms"`
	// Wait figures are of the grants' waits (logged by this tool only).
	WaitMedianMs *int64 `json:"waitMedianMs"`
	WaitP90Ms    *int64 `json:"waitP90Ms"`
	// ProvisionMedianMs is of the grants' provision and health times.
	ProvisionMedianMs *int64 `json:"provisionMedianMs"`
	// LastFailure is the most recent failure in the window.
	LastFailure *HistoryEvent `json:"lastFailure"`

	holds, waits, provisions []int64
}

// HistoryEvent is one event of the log about a slot.
type HistoryEvent struct {
	At    string `json:"at"`
	Event string `json:"event"`
	Slot  any    `json:"slot"`
	Owner string `json:"owner,omitempty"`
	Error string `json:"error,omitempty"`
}

// holdEnds are the events that end a slot's hold (a takeover ends the
// previous holder's, at its last heartbeat); failures count in Failures.
var holdEnds = map[string]string{
	EventReleased: "release", EventSlotReaped: "reap",
	EventSlotTakeoverOnGrant: "takeover", EventSlotTakeoverOnReprovision: "takeover",
	EventSlotTakeoverOnQuarantine: "takeover",
}

// History reads the pool's log and sums it up per slot: grants, how holds
// ended and how long they were, waits, provision times, failures and
// quarantines, and utilisation (time held over the window). A hold is a
// "granted" event up to the slot's next release, reap or takeover (a
// reaped or taken-over hold ends at its holder's last heartbeat), or the
// slot's next grant if its end was not logged.
func (p *Pool) History(ctx context.Context, o HistoryOptions) (*History, error) {
	var only *Slot
	if o.Slot != "" {
		s, err := p.cfg.SlotByID(o.Slot)
		if err != nil {
			return nil, err
		}
		only = s
	}
	lines, err := p.Log(ctx)
	if err != nil {
		return nil, err
	}
	h := &History{Until: p.now()}
	if o.Since > 0 {
		h.From = h.Until.Add(-o.Since)
	}
	index := map[string]int{}
	for _, s := range p.cfg.Slots {
		if only != nil && s != only {
			continue
		}
		index[fmt.Sprint(s.RawID)] = len(h.Slots)
		h.Slots = append(h.Slots, SlotHistory{Slot: s.RawID})
	}
	if o.Since <= 0 { // the whole log: from its earliest stamp about these slots
		for _, line := range lines {
			var e struct {
				At   string `json:"at"`
				Slot any    `json:"slot_id"`
			}
			if json.Unmarshal(line, &e) != nil || e.Slot == nil {
				continue
			}
			if _, ok := index[fmt.Sprint(e.Slot)]; !ok {
				continue
			}
			if at, err := lease.ParseTime(e.At); err == nil && (h.From.IsZero() || at.Before(h.From)) {
				h.From = earlier(at, h.Until)
			}
		}
	}
	open := map[int]time.Time{} // slot index → start of its current hold
	for _, line := range lines {
		var e struct {
			At          string          `json:"at"`
			Event       string          `json:"event"`
			Slot        any             `json:"slot_id"`
			Owner       string          `json:"owner"`
			By          string          `json:"by"`
			Error       string          `json:"error"`
			WaitedMs    *int64          `json:"waitedMs"`
			ProvisionMs *int64          `json:"provisionMs"`
			Previous    json.RawMessage `json:"previous"`
		}
		if json.Unmarshal(line, &e) != nil || e.Slot == nil {
			continue
		}
		at, err := lease.ParseTime(e.At)
		if err != nil {
			continue
		}
		// Writers' clocks differ (on etcd they are other hosts'): an event
		// stamped ahead of this clock happened by now.
		at = earlier(at, h.Until)
		i, ok := index[fmt.Sprint(e.Slot)]
		if !ok {
			continue
		}

		sh := &h.Slots[i]
		inWindow := !at.Before(h.From)
		end := func(stop time.Time, counted bool) {
			start, ok := open[i]
			if !ok {
				return
			}
			delete(open, i)
			if stop.Before(start) {
				return // stamped before its grant by a skewed clock: no length to tell
			}
			sh.HeldMs += overlap(start, stop, h.From, h.Until).Milliseconds()
			if counted && !stop.Before(h.From) {
				sh.holds = append(sh.holds, stop.Sub(start).Milliseconds())
			}
		}
		switch kind := holdEnds[e.Event]; {
		case e.Event == EventGranted:
			end(at, true) // its end was not logged
			open[i] = at
			if inWindow {
				sh.Grants++
				if e.WaitedMs != nil {
					sh.waits = append(sh.waits, *e.WaitedMs)
				}
				if e.ProvisionMs != nil {
					sh.provisions = append(sh.provisions, *e.ProvisionMs)
				}
			}
		case kind != "":
			stop := at
			if kind != "release" {
				if prev := lease.DecodeRecord("", e.Previous); len(e.Previous) > 0 && !prev.Corrupt && !prev.Heartbeat.IsZero() {
					stop = earlier(prev.Heartbeat, at)
				}
			}
			end(stop, true)
			if inWindow {
				switch kind {
				case "release":
					sh.Releases++
				case "reap":
					sh.Reaps++
				default:
					sh.Takeovers++
				}
			}
		case failureEvents[e.Event] || e.Event == EventGrantLeaseLostReset:
			if inWindow {
				sh.Failures++
				sh.LastFailure = &HistoryEvent{At: e.At, Event: e.Event, Slot: e.Slot, Owner: e.Owner, Error: e.Error}
			}
		case e.Event == EventSlotQuarantined:
			if inWindow {
				sh.Quarantines++
			}
		}
		if inWindow {
			owner := e.Owner
			if owner == "" {
				owner = e.By
			}
			h.Events = append(h.Events, HistoryEvent{At: e.At, Event: e.Event, Slot: e.Slot, Owner: owner, Error: e.Error})
		}
	}
	for i, start := range open { // holds still going count until now
		h.Slots[i].HeldMs += overlap(start, h.Until, h.From, h.Until).Milliseconds()
	}
	if h.From.IsZero() {
		h.From = h.Until
	}
	window := h.Until.Sub(h.From).Milliseconds()
	h.All = SlotHistory{}
	for i := range h.Slots {
		sh := &h.Slots[i]
		sh.finish(window)
		h.All.Grants += sh.Grants
		h.All.Releases += sh.Releases
		h.All.Reaps += sh.Reaps
		h.All.Takeovers += sh.Takeovers
		h.All.Failures += sh.Failures
		h.All.Quarantines += sh.Quarantines
		h.All.HeldMs += sh.HeldMs
		h.All.holds = append(h.All.holds, sh.holds...)
		h.All.waits = append(h.All.waits, sh.waits...)
		h.All.provisions = append(h.All.provisions, sh.provisions...)
		if sh.LastFailure != nil && (h.All.LastFailure == nil || sh.LastFailure.At > h.All.LastFailure.At) {
			h.All.LastFailure = sh.LastFailure
		}
	}
	h.All.finish(window * int64(max(len(h.Slots), 1)))
	return h, nil
}

// finish computes the figures from the samples, over a window of ms.
func (sh *SlotHistory) finish(windowMs int64) {
	if windowMs > 0 {
		sh.Utilisation = min(float64(sh.HeldMs)/float64(windowMs), 1)
	}
	sh.HoldMedianMs, sh.HoldP90Ms = percentile(sh.holds, 50), percentile(sh.holds, 90)
	sh.WaitMedianMs, sh.WaitP90Ms = percentile(sh.waits, 50), percentile(sh.waits, 90)
	sh.ProvisionMedianMs = percentile(sh.provisions, 50)
}

// percentile is the nearest-rank percentile q of xs, or nil for none.
func percentile(xs []int64, q int) *int64 {
	if len(xs) == 0 {
		return nil
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := (q*len(s) + 99) / 100 // ceil(q/100 × n)
	v := s[max(rank, 1)-1]
	return &v
}

// overlap is how much of [a, b) lies within [from, until).
func overlap(a, b, from, until time.Time) time.Duration {
	a, b = later(a, from), earlier(b, until)
	if !b.After(a) {
		return 0
	}
	return b.Sub(a)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
