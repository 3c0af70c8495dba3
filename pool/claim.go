package pool

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/durable-lease/durable-lease/lease"
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
