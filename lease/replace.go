package lease

import (
	"context"
	"fmt"
)

// Replace takes kind's lease from its current holder and gives it to r in
// one change: a new incarnation, with a new token and a larger fence, and
// the replaced record journaled as a forced release by r.Owner. With token
// set, the record replaced must be the one carrying it (else ErrNotHeld
// or ErrTokenMismatch), so of several callers that read the same record
// exactly one replaces it; with token "", whatever holds kind, or nothing,
// is replaced. It is for an owner taking over a lease it manages (a pool
// lifting its quarantine of a slot), never for ordinary acquisition.
func (s *Store) Replace(ctx context.Context, token string, r Request) (*Acquisition, error) {
	if err := s.checkRequest(r); err != nil {
		return nil, err
	}
	next := NewToken()
	var prev *Record
	stored, err := s.update(ctx, r.Kind, r.Owner, func(cur *Record) (Change, error) {
		prev = cur
		switch {
		case token != "" && cur == nil:
			return Change{}, fmt.Errorf("%w: %s has no record to replace", ErrNotHeld, r.Kind)
		case token != "" && (cur.Corrupt || cur.Token != token):
			return Change{}, fmt.Errorf("%w: %s is no longer the record to replace (it was replaced or released meanwhile)", ErrTokenMismatch, r.Kind)
		}
		ch := Change{Op: OpAcquire, Record: s.newRecord(r, next)}
		if cur != nil {
			ch.Event = &Event{Event: EventForceRelease, Kind: r.Kind, By: r.Owner, Previous: cur}
		}
		return ch, nil
	}, nil)
	if err != nil {
		return nil, err
	}
	out := &Acquisition{Record: stored}
	if prev != nil {
		out.TookOverExpired, out.Previous = !prev.Seen.Live, prev
	}
	return out, nil
}
