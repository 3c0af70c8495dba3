package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/durable-lease/durable-lease/lease"
)

// The plumbing below exposes the steps a waiter runs, one at a time, for
// callers that drive the queue themselves (a conformance suite, a broker
// of their own): join the queue without waiting, make one self-grant
// attempt, keep an entry live. A waiter made of these steps follows the
// same protocol as [Pool.Acquire]; nothing here decides differently.

// Enqueue adds an entry of the given mode (ModeBlocking or ModeAsync) for
// owner at the tail of the live queue and returns at once, with no waiter
// behind it: the caller must keep the entry live with [Pool.HeartbeatEntry]
// at least every waiterStaleMs, or the next sweep drops it, and grant it
// with [Pool.TryGrant]. It journals nothing (see [Pool.Request] for an
// async request).
func (p *Pool) Enqueue(ctx context.Context, owner, session, mode string) (*Queued, error) {
	if mode != ModeBlocking && mode != ModeAsync {
		return nil, fmt.Errorf("%w: mode %q must be %s or %s", ErrInvalid, mode, ModeBlocking, ModeAsync)
	}
	r := AcquireRequest{Owner: owner, Session: session}
	if err := r.check(p); err != nil {
		return nil, err
	}
	e, pos, err := p.enqueue(ctx, r.Owner, r.Session, mode)
	if err != nil {
		return nil, err
	}
	return &Queued{RequestID: e.ID, Owner: e.Owner, Session: e.Session, Position: pos, Entry: e}, nil
}

// TryGrant makes one self-grant attempt for the queued entry requestID, as
// a waiter makes at each wake-up: it sweeps, and grants the entry a slot
// (provisioned and health-checked, its grant file written and, for an
// async entry, its nudge sent) if its turn has come and a free slot is
// won. Otherwise it fails with a [*QueueError] matching ErrSaturated that
// gives the entry's position. An entry of another owner than owner is
// refused with lease.ErrNotOwner before anything is touched (not even a
// sweep). A request that has left the queue with a slot fails with a
// [*GrantedError] (matching ErrGranted and ErrQueueEntryLost), one whose
// grant failed with its recorded failure as [Pool.Claim] reports it, and
// one that is not queued at all (dropped, withdrawn, never queued) with
// ErrQueueEntryLost. A failed provision or health check fails as
// [Pool.Acquire] does.
func (p *Pool) TryGrant(ctx context.Context, requestID, owner string) (*Grant, error) {
	if err := CheckRequestID(requestID); err != nil {
		return nil, err
	}
	if err := p.checkOwner(owner); err != nil {
		return nil, err
	}
	const action = "grant it"
	if err := p.mustBeQueued(ctx, requestID, owner, action); err != nil {
		return nil, err
	}
	g, err := p.tryGrant(ctx, requestID, owner, holderWork{})
	if g != nil || err != nil {
		return g, p.leftQueue(ctx, requestID, owner, action, err)
	}
	live, err := p.queue(ctx)
	if err != nil {
		return nil, err
	}
	for i, e := range live {
		if e.ID == requestID {
			pos := p.position(ctx, e.ID, i)
			return nil, &QueueError{Err: ErrSaturated, RequestID: requestID, Position: pos.Position, EtaMs: pos.EtaMs}
		}
	}
	return nil, p.leftQueue(ctx, requestID, owner, action,
		fmt.Errorf("%w: request %s left the queue during the attempt", ErrQueueEntryLost, requestID))
}

// HeartbeatEntry keeps the queued entry requestID live, as a waiter does
// every poll, and returns its position. Another owner's entry is refused
// with lease.ErrNotOwner and left as it was; a request no longer queued
// fails as with [Pool.TryGrant] (a *GrantedError when it was granted,
// ErrQueueEntryLost when it was dropped or never queued).
func (p *Pool) HeartbeatEntry(ctx context.Context, requestID, owner string) (Position, error) {
	if err := CheckRequestID(requestID); err != nil {
		return Position{}, err
	}
	if err := p.checkOwner(owner); err != nil {
		return Position{}, err
	}
	const action = "heartbeat it"
	if err := p.mustBeQueued(ctx, requestID, owner, action); err != nil {
		return Position{}, err
	}
	pos, _, err := p.heartbeatEntry(ctx, requestID, owner)
	return pos, p.leftQueue(ctx, requestID, owner, action, err)
}

// found is what a lock-free look finds of a request: its live queue entry,
// or, once it has left the queue, what became of it.
type found struct {
	entry *Entry
	// holder is the request's owner as the entry, its grant file or the
	// lease of the slot being provisioned for it names it ("" when
	// nothing names one: a failure record, or a request not found).
	holder string
	// left, for a request not queued, is a *GrantedError, the recorded
	// failure of its grant as a claim reports it (a *ClaimError), or nil
	// when nothing is known of it.
	left error
}

// ownedBy refuses, with lease.ErrNotOwner, a request whose holder is
// another owner than owner. Owners are compared exactly, as the lease
// store compares a record's owner; what names no owner (a failure record,
// a queue entry written without one) is refused to nobody, as a grant
// file without an owner is claimed by anyone.
func (f found) ownedBy(requestID, owner, action string) error {
	if f.holder != "" && f.holder != owner {
		return notOwner(requestID, f.holder, action)
	}
	return nil
}

// notOwner is the refusal of a request of holder to another owner. The
// holder's name is no secret (status lists each entry's owner); its token
// is never shown.
func notOwner(requestID, holder, action string) error {
	return fmt.Errorf("%w: request %s belongs to another owner (%q); only its owner may %s",
		lease.ErrNotOwner, requestID, holder, action)
}

// ownedBy refuses another owner's entry (see found.ownedBy).
func ownedBy(e Entry, owner, action string) error {
	return found{holder: e.Owner}.ownedBy(e.ID, owner, action)
}

// find looks for request id without any lock: in the live queue, then
// where a granted request is found.
func (p *Pool) find(ctx context.Context, id string) (found, error) {
	live, err := p.queue(ctx)
	if err != nil {
		return found{}, err
	}
	for i := range live {
		if live[i].ID == id {
			return found{entry: &live[i], holder: live[i].Owner}, nil
		}
	}
	return p.findGranted(ctx, id)
}

// findGranted looks for the grant of request id, which is not queued: a
// grant takes its slot and leaves the queue before it writes its grant
// file, and meanwhile only the slot's lease names the request, so the
// grant file is read on either side of the slots (as a claim reads them).
func (p *Pool) findGranted(ctx context.Context, id string) (found, error) {
	doc, err := p.readGrant(ctx, id)
	if err != nil {
		return found{}, err
	}
	if doc == nil {
		s, holder := p.slotHolder(ctx, id)
		if doc, err = p.readGrant(ctx, id); err != nil {
			return found{}, err
		}
		if doc == nil && s == nil {
			return found{}, nil
		}
		if doc == nil {
			slot, _ := json.Marshal(s.RawID)
			return found{holder: holder, left: &GrantedError{RequestID: id, Slot: slot, State: GrantProvisioning}}, nil
		}
	}
	var state, holder string
	_ = json.Unmarshal(doc["state"], &state)
	_ = json.Unmarshal(doc["owner"], &holder)
	slot := doc["slot_id"]
	if slot == nil {
		slot = doc["slot"]
	}
	if state == GrantReady {
		return found{holder: holder, left: &GrantedError{RequestID: id, Slot: slot, State: state}}, nil
	}
	_, failed := p.checkGrant(ctx, id, doc) // a failure record: no store access
	return found{holder: holder, left: failed}, nil
}

// slotHolder returns the slot whose live lease was acquired for
// requestID, and that lease's owner, if any.
func (p *Pool) slotHolder(ctx context.Context, requestID string) (*Slot, string) {
	for _, s := range p.cfg.Slots {
		st, err := p.store.Status(ctx, s.Kind)
		if err != nil || st.State != lease.Held {
			continue
		}
		var pl slotPayload
		if json.Unmarshal(st.Record.Payload, &pl) == nil && pl.RequestID == requestID {
			return s, st.Record.Owner
		}
	}
	return nil, ""
}

// mustBeQueued is the lock-free check a plumbing step makes before it
// touches anything: another owner's request is refused with
// lease.ErrNotOwner, a granted one is reported (see found.left). A
// request found nowhere is left to the step, which reports it lost.
func (p *Pool) mustBeQueued(ctx context.Context, requestID, owner, action string) error {
	f, err := p.find(ctx, requestID)
	if err != nil {
		return err
	}
	if err := f.ownedBy(requestID, owner, action); err != nil {
		return err
	}
	if f.entry == nil {
		return f.left
	}
	return nil
}

// leftQueue turns a step's ErrQueueEntryLost into what became of the
// request, when it left the queue in between (granted, or its grant
// failed); other errors, and nil, are returned as they are.
func (p *Pool) leftQueue(ctx context.Context, requestID, owner, action string, err error) error {
	if !errors.Is(err, ErrQueueEntryLost) || errors.Is(err, ErrGranted) {
		return err
	}
	f, ferr := p.findGranted(ctx, requestID)
	if ferr != nil {
		return err
	}
	if oerr := f.ownedBy(requestID, owner, action); oerr != nil {
		return oerr
	}
	if f.left != nil {
		return f.left
	}
	return err
}
