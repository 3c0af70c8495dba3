package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/provision"
)

// Probed is one slot a probe checked.
type Probed struct {
	Slot any  `json:"slot"`
	OK   bool `json:"ok"`
	// Error is the failure, when OK is false.
	Error string `json:"error,omitempty"`
	// Restored is set when a slot the pool had quarantined passed its
	// reset and health check and is back in rotation.
	Restored bool `json:"restored,omitempty"`
	// Quarantined is set when the slot is quarantined after the probe.
	Quarantined bool `json:"quarantined,omitempty"`
}

// probe health-checks the pool's slots, when the pool file sets a probe
// interval and a health command and the last probe (the log's last
// slots_probed event) is at least that old:
//
//   - a free slot is taken (so no waiter gets it meanwhile), its health
//     command run, and released; a failure counts among its failures in
//     a row, so quarantineAfter failed probes quarantine it;
//   - a slot the pool quarantined itself (by "pool") is reset and
//     health-checked, and back in rotation if both pass;
//   - held slots, and slots an operator quarantined, are left alone.
func (p *Pool) probe(ctx context.Context, owner string) []Probed {
	if p.cfg.Probe <= 0 || p.cmds.health == "" {
		return nil
	}
	// Due when the last probe is probeMs old, or stamped ahead of the
	// clock (a clock step, another host's clock): a probe must not stop
	// for as long as the clocks disagree. Not due when the log cannot be
	// read: probing at every pump would hold every free slot each time.
	last, found, err := p.lastEvent(ctx, EventSlotsProbed)
	if err != nil {
		fmt.Fprintf(p.log, "pool: probe skipped: the pool's log: %v\n", err)
		return nil
	}
	if age := p.now().Sub(last); found && age >= 0 && age < p.cfg.Probe {
		return nil
	}
	out := []Probed{}
	for _, s := range p.cfg.Slots {
		st, err := p.store.Status(ctx, s.Kind)
		if err != nil {
			continue
		}
		switch q := quarantineOf(st.Record); {
		case st.State == lease.Free:
			if r, ok := p.probeFree(ctx, s, owner); ok {
				out = append(out, r)
			}
		case st.State == lease.Held && q != nil && q.By == ByPool:
			r := Probed{Slot: s.RawID, OK: true, Restored: true}
			if err := p.restore(ctx, s, owner, "probe"); err != nil {
				r = Probed{Slot: s.RawID, Error: err.Error(), Quarantined: true}
			}
			out = append(out, r)
		}
	}
	p.logEvent(ctx, EventSlotsProbed, map[string]any{"owner": owner, "slots": len(out)})
	return out
}

// probeFree runs the health command on free slot s under its lease. ok is
// false when the slot could not be taken (a waiter was quicker).
func (p *Pool) probeFree(ctx context.Context, s *Slot, owner string) (Probed, bool) {
	payload := json.RawMessage(`{"probe":true}`)
	acq, err := p.store.Acquire(ctx, lease.Request{Kind: s.Kind, Owner: owner, TTLMinutes: p.ttl, Payload: payload})
	if err != nil {
		return Probed{}, false
	}
	rec := acq.Record
	err = p.whileHolding(ctx, s, rec, func(ctx context.Context) error {
		return p.run(ctx, provision.ActionHealth, s, p.cmds.health)
	})
	if err == nil || errors.Is(err, ErrLeaseLost) || ctx.Err() != nil {
		if _, rerr := p.store.Release(context.WithoutCancel(ctx), lease.Ref{Kind: s.Kind, Owner: owner, Token: rec.Token}); rerr != nil && err == nil && !errors.Is(rerr, lease.ErrNotOwner) {
			err = rerr
		}
		if err != nil {
			return Probed{Slot: s.RawID, Error: err.Error()}, true
		}
		p.logEvent(ctx, EventSlotProbeOK, map[string]any{"slot_id": s.RawID, "owner": owner})
		return Probed{Slot: s.RawID, OK: true}, true
	}
	serr := &SlotError{Err: ErrHealthFailed, Slot: s, State: GrantHealthFailed, Cause: err}
	fields := map[string]any{"slot_id": s.RawID, "owner": owner, "error": serr.Error()}
	if o := failureOutput(err); o != "" {
		fields["output"] = o
	}
	p.logEvent(ctx, EventSlotProbeFailed, fields)
	p.afterFailure(ctx, s, rec, serr)
	r := Probed{Slot: s.RawID, Error: serr.Error()}
	if st, err := p.store.Status(ctx, s.Kind); err == nil && st.State == lease.Held && quarantineOf(st.Record) != nil {
		r.Quarantined = true
	}
	return r, true
}

// lastEvent returns the time of the log's last event named event, and
// whether there is one.
func (p *Pool) lastEvent(ctx context.Context, event string) (time.Time, bool, error) {
	lines, err := p.backend.Log(ctx)
	if err != nil {
		return time.Time{}, false, err
	}
	for i := len(lines) - 1; i >= 0; i-- {
		var e struct {
			At    string `json:"at"`
			Event string `json:"event"`
		}
		if json.Unmarshal(lines[i], &e) == nil && e.Event == event {
			at, err := lease.ParseTime(e.At)
			return at, err == nil, nil
		}
	}
	return time.Time{}, false, nil
}
