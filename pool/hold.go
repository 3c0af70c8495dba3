package pool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

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

// Keep starts keeping a grant's slot lease alive (see [lease.Store.Keep]);
// the hold's Release gives the slot back through [Pool.Release], so the
// hold time feeds the pool's ETAs.
func (p *Pool) Keep(ctx context.Context, g *Grant, o lease.HoldOptions) (*lease.Hold, error) {
	slotID := fmt.Sprint(g.Slot)
	if o.Release == nil {
		o.Release = func(ctx context.Context) error {
			r, err := p.Release(ctx, slotID, g.Owner, g.Token, false)
			if err != nil {
				return err
			}
			return lease.ReleaseOutcome(g.Kind, r.Released, r.WasExpired)
		}
	}
	h, err := p.store.Keep(ctx, g.Kind, g.Owner, g.Token, o)
	if err != nil && errors.Is(err, lease.ErrLost) {
		return nil, fmt.Errorf("%w: slot %s: %w", ErrLeaseLost, slotID, err)
	}
	return h, err
}
