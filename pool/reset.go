package pool

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/provision"
)

// Reset runs the reset and health commands on a slot the caller holds, for
// a clean slot between phases of one run, heartbeating its lease meanwhile.
func (p *Pool) Reset(ctx context.Context, slotID, owner, token string) (*Slot, error) {
	s, err := p.cfg.SlotByID(slotID)
	if err != nil {
		return nil, err
	}
	if err := p.checkOwner(owner); err != nil {
		return nil, err
	}
	// The heartbeat checks owner, token and expiry inside the critical
	// section (a lock-free status read could be stale by the time the
	// reset starts) and gives the reset a fresh TTL.
	rec, err := p.store.Heartbeat(ctx, lease.Ref{Kind: s.Kind, Owner: owner, Token: token})
	if err != nil {
		return s, err
	}
	return s, p.resetAndCheck(ctx, s, rec)
}

func (p *Pool) resetAndCheck(ctx context.Context, s *Slot, rec *lease.Record) error {
	stage, err := p.runThenHealth(ctx, s, rec, provision.ActionReset, p.cmds.reset)
	switch {
	case err == nil, errors.Is(err, ErrLeaseLost), ctx.Err() != nil:
		return err
	case stage == provision.ActionReset:
		return &SlotError{Err: ErrProvisionFailed, Slot: s, State: GrantResetFailed, Cause: err}
	case stage == provision.ActionHealth:
		return &SlotError{Err: ErrHealthFailed, Slot: s, State: GrantHealthFailed, Cause: err}
	}
	return err
}

// Reprovision resets and health-checks a slot nobody holds: it takes the
// slot's lease (so no waiter is granted it meanwhile), runs the commands and
// releases it. A held slot is refused with lease.ErrHeld; its holder uses
// [Pool.Reset].
func (p *Pool) Reprovision(ctx context.Context, slotID, owner string) (*Slot, error) {
	s, err := p.cfg.SlotByID(slotID)
	if err != nil {
		return nil, err
	}
	payload := json.RawMessage(`{"reprovision":true}`)
	acq, err := p.store.Acquire(ctx, lease.Request{Kind: s.Kind, Owner: owner, TTLMinutes: p.ttl, Payload: payload})
	if err != nil {
		return s, err
	}
	if acq.TookOverExpired {
		p.logEvent(ctx, EventSlotTakeoverOnReprovision, map[string]any{"slot_id": s.RawID, "previous": acq.Previous})
	}
	err = p.resetAndCheck(ctx, s, acq.Record)
	fields := map[string]any{"slot_id": s.RawID, "owner": owner}
	if err == nil || errors.Is(err, ErrLeaseLost) || ctx.Err() != nil {
		if _, rerr := p.store.Release(context.WithoutCancel(ctx), lease.Ref{Kind: s.Kind, Owner: owner, Token: acq.Record.Token}); rerr != nil && err == nil && !errors.Is(rerr, lease.ErrNotOwner) {
			err = rerr
		}
		event := EventSlotReprovisioned
		if err != nil {
			event, fields["error"] = EventSlotReprovisionFailed, err.Error()
		}
		p.logEvent(ctx, event, fields)
		return s, err
	}
	// A failed command: logged first, so that it counts among the slot's
	// failures in a row, then the slot is released or quarantined.
	fields["error"] = err.Error()
	if out := failureOutput(err); out != "" {
		fields["output"] = out
	}
	p.logEvent(ctx, EventSlotReprovisionFailed, fields)
	p.afterFailure(ctx, s, acq.Record, err)
	return s, err
}

// Health runs a slot's health command; it needs no lease. It reports
// whether a health command is configured at all.
func (p *Pool) Health(ctx context.Context, slotID string) (*Slot, bool, error) {
	s, err := p.cfg.SlotByID(slotID)
	if err != nil {
		return nil, false, err
	}
	if p.cmds.health == "" {
		return s, false, nil
	}
	if err := p.run(ctx, provision.ActionHealth, s, p.cmds.health); err != nil {
		if ctx.Err() != nil {
			return s, true, err
		}
		return s, true, &SlotError{Err: ErrHealthFailed, Slot: s, State: GrantHealthFailed, Cause: err}
	}
	return s, true, nil
}
