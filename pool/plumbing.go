package pool

import (
	"context"
	"fmt"
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
// gives the entry's position, or with ErrQueueEntryLost when the entry is
// not in the live queue (granted already, dropped, never queued). A
// failed provision or health check fails as [Pool.Acquire] does.
func (p *Pool) TryGrant(ctx context.Context, requestID, owner string) (*Grant, error) {
	if err := CheckRequestID(requestID); err != nil {
		return nil, err
	}
	if err := p.checkOwner(owner); err != nil {
		return nil, err
	}
	g, err := p.tryGrant(ctx, requestID, owner)
	if g != nil || err != nil {
		return g, err
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
	return nil, fmt.Errorf("%w: request %s left the queue during the attempt", ErrQueueEntryLost, requestID)
}

// HeartbeatEntry keeps the queued entry requestID live, as a waiter does
// every poll, and returns its position; ErrQueueEntryLost when it is no
// longer queued.
func (p *Pool) HeartbeatEntry(ctx context.Context, requestID, owner string) (Position, error) {
	if err := CheckRequestID(requestID); err != nil {
		return Position{}, err
	}
	if err := p.checkOwner(owner); err != nil {
		return Position{}, err
	}
	return p.heartbeatEntry(ctx, requestID, owner)
}
