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

// Claim is what [Pool.Claim] found for an async request: exactly one of
// Grant (the raw grant file, verified live), Queued, or an error.
type Claim struct {
	Grant  map[string]json.RawMessage
	Queued *Queued
}

// GrantJSON renders the claimed grant with ok and state first, like a grant
// from acquire, and the other fields as the grant file has them.
func (c *Claim) GrantJSON() (json.RawMessage, error) {
	head := map[string]json.RawMessage{"ok": c.Grant["ok"], "state": c.Grant["state"]}
	if head["ok"] == nil {
		head["ok"] = json.RawMessage("true")
	}
	return marshalOrdered(c.Grant, []string{"ok", "state"}, head)
}

// Claim looks up an async request: its grant when ready and its lease still
// live, its queue position while it waits. Only the request's owner gets
// its grant (the grant carries the token; another owner fails with
// lease.ErrNotOwner), while the position of a queued request is told to
// any owner. A grant whose lease expired or was taken over fails with
// ErrLeaseLost (state lease_lost); a failed grant with the recorded failure
// (ErrProvisionFailed, ErrHealthFailed, ErrLeaseLost); an unknown request
// with ErrUnknownRequest.
func (p *Pool) Claim(ctx context.Context, requestID, owner string) (*Claim, error) {
	if err := CheckRequestID(requestID); err != nil {
		return nil, err
	}
	if err := p.checkOwner(owner); err != nil {
		return nil, err
	}
	g, err := p.readGrant(ctx, requestID)
	if err != nil {
		return nil, err
	}
	if g != nil {
		return p.claimGrant(ctx, requestID, owner, g)
	}
	p.sweep(ctx, owner)
	live, err := p.queue(ctx)
	if err != nil {
		return nil, err
	}
	for i, e := range live {
		if e.ID == requestID {
			// A place in the queue is no secret (status lists it too), so
			// it is told to whoever asks, as the Node tool tells it.
			return &Claim{Queued: &Queued{RequestID: e.ID, Owner: e.Owner, Session: e.Session, Position: p.position(ctx, e.ID, i), Entry: e}}, nil
		}
	}
	// Between leaving the queue and writing its grant file, a grant is
	// known only by its slot's lease, whose payload names the request:
	// that is a request being provisioned, not an unknown one. Either
	// implementation's grant goes through that window.
	if s := p.slotGranting(ctx, requestID); s != nil {
		// It may have finished meanwhile: the grant file decides.
		if g, err := p.readGrant(ctx, requestID); err == nil && g != nil {
			return p.claimGrant(ctx, requestID, owner, g)
		}
		return &Claim{Queued: &Queued{RequestID: requestID, Provisioning: true, Slot: s, Position: Position{RequestID: requestID}}}, nil
	}
	if g, err := p.readGrant(ctx, requestID); err == nil && g != nil {
		return p.claimGrant(ctx, requestID, owner, g) // granted while the queue was read
	}
	return nil, fmt.Errorf("%w: request %s is neither queued nor granted (its waiter may have died); request again", ErrUnknownRequest, requestID)
}

// claimGrant answers a claim from the request's grant file, which only its
// owner may read.
func (p *Pool) claimGrant(ctx context.Context, requestID, owner string, g map[string]json.RawMessage) (*Claim, error) {
	var grantOwner string
	_ = json.Unmarshal(g["owner"], &grantOwner)
	if err := (found{holder: grantOwner}).ownedBy(requestID, owner, "claim its grant"); err != nil {
		return nil, err
	}
	return p.checkGrant(ctx, requestID, g)
}

// slotGranting returns the slot whose live lease was acquired for
// requestID, if any.
func (p *Pool) slotGranting(ctx context.Context, requestID string) *Slot {
	s, _ := p.slotHolder(ctx, requestID)
	return s
}

// ClaimError is a failed claim: the recorded state and the grant file.
type ClaimError struct {
	Err   error
	State string
	Slot  json.RawMessage
	Note  string
}

func (e *ClaimError) Error() string {
	if e.Note != "" {
		return e.Note
	}
	return e.Err.Error()
}
func (e *ClaimError) Unwrap() error { return e.Err }

func (p *Pool) checkGrant(ctx context.Context, requestID string, g map[string]json.RawMessage) (*Claim, error) {
	var state, token, errText string
	_ = json.Unmarshal(g["state"], &state)
	_ = json.Unmarshal(g["token"], &token)
	_ = json.Unmarshal(g["error"], &errText)
	slotRaw := g["slot_id"]
	if slotRaw == nil {
		slotRaw = g["slot"]
	}
	switch state {
	case GrantReady:
	case GrantResetFailed:
		return nil, &ClaimError{Err: ErrProvisionFailed, State: state, Slot: slotRaw, Note: errText}
	case GrantHealthFailed:
		return nil, &ClaimError{Err: ErrHealthFailed, State: state, Slot: slotRaw, Note: errText}
	case GrantQuarantined:
		return nil, &ClaimError{Err: ErrQuarantined, State: state, Slot: slotRaw, Note: errText}
	default:
		return nil, &ClaimError{Err: ErrLeaseLost, State: state, Slot: slotRaw, Note: errText}
	}
	var id any
	_ = json.Unmarshal(slotRaw, &id)
	s, err := p.cfg.SlotByID(fmt.Sprint(id))
	if err != nil {
		return nil, &ClaimError{Err: ErrLeaseLost, State: GrantLeaseLost, Slot: slotRaw, Note: "the granted slot is no longer in this pool; request again"}
	}
	st, err := p.store.Status(ctx, s.Kind)
	if err != nil {
		return nil, err
	}
	if st.State != lease.Held || st.Record.Token != token {
		return nil, &ClaimError{Err: ErrLeaseLost, State: GrantLeaseLost, Slot: slotRaw,
			Note: fmt.Sprintf("the lease of slot %s expired or was taken over before the claim; request again", s.ID)}
	}
	return &Claim{Grant: g}, nil
}

// Released reports a slot release.
type Released struct {
	Slot       *Slot
	Released   bool
	WasExpired bool
}

// Release gives a slot back (owner and token checked, or force) and records
// how long it was held for the ETA statistics.
func (p *Pool) Release(ctx context.Context, slotID, owner, token string, force bool) (*Released, error) {
	s, err := p.cfg.SlotByID(slotID)
	if err != nil {
		return nil, err
	}
	bookkeeper := owner
	if force && owner == "" {
		if p.cfg.Bookkeeper == "" {
			return nil, fmt.Errorf("%w: release --force without --owner needs a \"bookkeeper\" owner in the pool file", ErrInvalid)
		}
		bookkeeper = p.cfg.Bookkeeper
	}
	if err := p.checkOwner(bookkeeper); err != nil {
		return nil, err
	}
	before, err := p.store.Status(ctx, s.Kind)
	if err != nil {
		return nil, err
	}
	// Record the hold time while the slot is still held: the next waiter
	// wakes the moment the lease file goes, and must not then wait for the
	// queue lock behind this bookkeeping. If the release below is refused
	// after all (a takeover in between), the statistics keep one stray
	// sample; they only feed ETAs.
	if rec := before.Record; rec != nil && !rec.Corrupt && (force || rec.Owner == owner && rec.Token == token) {
		if held := p.now().Sub(rec.AcquiredAt); held > 0 {
			p.recordHold(ctx, bookkeeper, held)
		}
	}
	var rel *lease.Released
	if force {
		rel, err = p.store.ForceRelease(ctx, s.Kind, bookkeeper)
	} else {
		rel, err = p.store.Release(ctx, lease.Ref{Kind: s.Kind, Owner: owner, Token: token})
	}
	if err != nil {
		return nil, err
	}
	out := &Released{Slot: s, Released: rel.Released, WasExpired: rel.WasExpired}
	if rel.Released {
		p.logEvent(ctx, EventReleased, map[string]any{"slot_id": s.RawID, "owner": bookkeeper, "forced": force})
		p.sweep(ctx, bookkeeper)
	}
	return out, nil
}

// recordHold appends a hold time to the statistics, keeping the last
// movingAvgWindow.
func (p *Pool) recordHold(ctx context.Context, owner string, held time.Duration) {
	if err := p.backend.AddHold(ctx, owner, float64(held.Milliseconds()), movingAvgWindow); err != nil {
		fmt.Fprintf(p.log, "pool: recording the hold time: %v\n", err)
	}
}

// Heartbeat refreshes a slot lease; an expired lease is never revived.
func (p *Pool) Heartbeat(ctx context.Context, slotID, owner, token string) (*Slot, *lease.Record, error) {
	s, err := p.cfg.SlotByID(slotID)
	if err != nil {
		return nil, nil, err
	}
	rec, err := p.store.Heartbeat(ctx, lease.Ref{Kind: s.Kind, Owner: owner, Token: token})
	return s, rec, err
}

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
