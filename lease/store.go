package lease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"
)

// Store is a set of leases with their semantics: expiry, fencing tokens,
// the owner fence and loud takeover. It is safe for concurrent use by
// goroutines and by processes sharing the same backend.
type Store struct {
	b     Backend
	opts  options
	ender workEnder // nil where no work can be ended (off Linux)
}

// New returns a Store over any backend.
func New(b Backend, opts ...Option) (*Store, error) {
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	return &Store{b: b, opts: o, ender: defaultEnder()}, nil
}

func applyOptions(opts []Option) (options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Dir is the store's directory, or "" for a backend that is not a
// directory (one that has no Dir method).
func (s *Store) Dir() string {
	if d, ok := s.b.(interface{ Dir() string }); ok {
		return d.Dir()
	}
	return ""
}

// Where names the store for people: its directory, or what the backend
// calls itself (a store URL).
func (s *Store) Where() string {
	if n, ok := s.b.(fmt.Stringer); ok {
		return n.String()
	}
	return ""
}

// JournalWhere names where the store journals its events, for messages:
// the backend's JournalWhere() when it has one (reaped.log, a key prefix,
// a ref), else "the store's journal".
func (s *Store) JournalWhere() string {
	if j, ok := s.b.(interface{ JournalWhere() string }); ok {
		return j.JournalWhere()
	}
	return "the store's journal"
}

// Backend is the backend the store keeps its records in, for layers above
// the store that keep state of their own in the same place (a pool's
// queue): they look for the interface they need on it.
func (s *Store) Backend() Backend { return s.b }

// OwnerPattern is the store's owner fence.
func (s *Store) OwnerPattern() *OwnerFence { return s.opts.owners }

// Now is the store's clock reading.
func (s *Store) Now() time.Time { return s.opts.clock.Now() }

// CheckOwner reports, as an error matching ErrInvalid, an owner outside
// the store's owner fence.
func (s *Store) CheckOwner(owner string) error {
	if !s.opts.owners.Match(owner) {
		return invalidf("owner %q does not match the owner pattern %s", owner, s.opts.owners)
	}
	return nil
}

// Request describes an acquisition.
type Request struct {
	Kind  string
	Owner string
	// TTLMinutes is the longest silence, in minutes, before the lease expires.
	TTLMinutes float64
	// Payload is any JSON value to store with the lease (nil for null).
	Payload json.RawMessage
	// Work, when set, names the cgroup the holder's work will run in
	// (see [Work]), so that whoever takes the lease from it later ends
	// what it left running there first.
	Work *Work
}

func (s *Store) checkRequest(r Request) error {
	if err := checkKind(r.Kind); err != nil {
		return err
	}
	if err := s.CheckOwner(r.Owner); err != nil {
		return err
	}
	if err := checkTTL(r.TTLMinutes); err != nil {
		return err
	}
	return checkPayload(r.Payload)
}

// Acquisition is a granted lease.
type Acquisition struct {
	Record *Record
	// TookOverExpired is set when the lease replaced an expired or corrupt
	// record, which is then in Previous and in the journal.
	TookOverExpired bool
	Previous        *Record
}

// Acquire takes the lease on r.Kind if no live record holds it. A live
// record, even one of the same owner, refuses with a [*HeldError]. An expired
// or corrupt record is taken over and journaled.
func (s *Store) Acquire(ctx context.Context, r Request) (*Acquisition, error) {
	if err := s.checkRequest(r); err != nil {
		return nil, err
	}
	// A live record refuses without entering the critical section: a
	// lock-free read sees a whole record (records are renamed into place),
	// and a refusal changes nothing, so it may be decided on what was read.
	// Under contention most acquires are refused, and keeping them out of
	// the guard leaves it to those that can change something.
	if ru, ok := s.b.(ReadingUpdater); !ok || !ru.UpdateReadsFirst() {
		if cur, err := s.b.Read(ctx, r.Kind); err == nil && cur != nil && cur.Seen.Live {
			return nil, &HeldError{Record: cur, ExpiresAt: cur.Seen.ExpiresAt}
		}
	}
	token := NewToken()
	var prev *Record
	stored, err := s.update(ctx, r.Kind, r.Owner, func(cur *Record) (Change, error) {
		prev = cur
		if cur != nil && cur.Seen.Live {
			return Change{}, &HeldError{Record: cur, ExpiresAt: cur.Seen.ExpiresAt}
		}
		ch := Change{Op: OpAcquire, Record: s.newRecord(r, token)}
		if cur != nil {
			// A takeover is journaled with the change, before it happens:
			// one that cannot be journaled does not happen.
			ch.Event = &Event{Event: EventTakeover, Kind: r.Kind, By: r.Owner, Previous: cur}
		}
		return ch, nil
	}, nil)
	if err != nil {
		return nil, err
	}
	out := &Acquisition{Record: stored}
	if prev != nil {
		out.TookOverExpired, out.Previous = true, prev
	}
	return out, nil
}

// newRecord is the record of a new incarnation of r.Kind under token,
// acquired now.
func (s *Store) newRecord(r Request, token string) *Record {
	now, boot := s.instant()
	rec := &Record{
		V: RecordVersion, Kind: r.Kind, Owner: r.Owner, Token: token,
		TTLMinutes: r.TTLMinutes, Payload: compactJSON(r.Payload),
	}
	rec.stamp(now, boot)
	rec.AcquiredAt = rec.Heartbeat
	rec.setWork(r.Work)
	return rec
}

// Heartbeat refreshes the live lease ref names and returns the updated
// record. It fails with ErrNotHeld when there is no record, ErrNotOwner
// when the owner or the token differ, and ErrExpired when the lease is
// past its TTL or unreadable: an expired lease is never revived.
func (s *Store) Heartbeat(ctx context.Context, ref Ref) (*Record, error) {
	kind, owner, token := ref.Kind, ref.Owner, ref.Token
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	if err := s.CheckOwner(owner); err != nil {
		return nil, err
	}
	return s.b.Update(ctx, kind, func(cur *Record) (Change, error) {
		switch {
		case cur == nil:
			return Change{}, fmt.Errorf("%w: %s has no record to heartbeat; acquire it", ErrNotHeld, kind)
		case cur.Corrupt:
			return Change{}, fmt.Errorf("%w: the record of %s is unreadable (%s)", ErrExpired, kind, cur.Reason)
		case cur.Owner != owner || cur.Token != token:
			return Change{}, notOwner(kind, cur)
		case !cur.Seen.Live:
			return Change{}, fmt.Errorf("%w: %s expired at %s and is forfeit; acquire it again", ErrExpired, kind, FormatTime(cur.Seen.ExpiresAt))
		}
		now, boot := s.instant()
		next := *cur
		next.Extra = maps.Clone(cur.Extra)
		next.Seen = Liveness{} // the backend judges what it stores
		next.stamp(now, boot)
		return Change{Op: OpRenew, Record: &next}, nil
	})
}

func notOwner(kind string, cur *Record) error {
	if cur.Corrupt {
		return fmt.Errorf("%w: the record of %s is unreadable", ErrNotOwner, kind)
	}
	return fmt.Errorf("%w: %s is held by %q with a different owner or token", ErrNotOwner, kind, cur.Owner)
}

// Released reports what a release did.
type Released struct {
	// Released is false when there was no record to release.
	Released bool
	// WasExpired is set when the released record was already past its TTL.
	WasExpired bool
	// Previous is the record removed by a forced release.
	Previous *Record
}

// Release gives the lease ref names back: its owner and the token minted
// at acquire. Another owner, or an unreadable record, fails with
// ErrNotOwner; the owner with another token fails with ErrTokenMismatch
// (which also matches ErrNotOwner). Releasing a kind with no record
// succeeds with Released false.
func (s *Store) Release(ctx context.Context, ref Ref) (*Released, error) {
	kind, owner, token := ref.Kind, ref.Owner, ref.Token
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	if err := s.CheckOwner(owner); err != nil {
		return nil, err
	}
	out := &Released{}
	update := s.b.Update
	if u, ok := s.b.(UnfencedUpdater); ok {
		// Nothing below looks at the record's fence, and the record is
		// not handed on: the counter need not be read.
		update = u.UpdateUnfenced
	}
	_, err := s.update(ctx, kind, owner, func(cur *Record) (Change, error) {
		*out = Released{}
		if cur == nil {
			return Change{}, nil
		}
		if cur.Corrupt || cur.Owner != owner {
			return Change{}, notOwner(kind, cur)
		}
		if cur.Token != token {
			return Change{}, fmt.Errorf("%w: %s is held by %q under another token (it was taken over, or the token is wrong)", ErrTokenMismatch, kind, cur.Owner)
		}
		out.Released, out.WasExpired = true, !cur.Seen.Live
		return Change{Op: OpDelete}, nil
	}, update)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ForceRelease removes kind's record whoever holds it, bypassing owner and
// token, and journals it. It is the operator's escape hatch; automation
// should [Store.Reap] dead leases instead. by names who forced it ("" if
// unknown) and must satisfy the owner fence when given.
func (s *Store) ForceRelease(ctx context.Context, kind, by string) (*Released, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	if by != "" {
		if err := s.CheckOwner(by); err != nil {
			return nil, err
		}
	}
	out := &Released{}
	_, err := s.update(ctx, kind, by, func(cur *Record) (Change, error) {
		*out = Released{}
		if cur == nil {
			return Change{}, nil
		}
		out.Released, out.WasExpired, out.Previous = true, !cur.Seen.Live, cur
		return Change{Op: OpDelete, Event: &Event{Event: EventForceRelease, Kind: kind, By: by, Previous: cur}}, nil
	}, nil)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Reap removes kind's record only if it is dead (expired or corrupt), and
// journals it. It returns the removed record, nil when there was none, or
// ErrNotDead for a live lease.
func (s *Store) Reap(ctx context.Context, kind string) (*Record, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	var prev *Record
	_, err := s.update(ctx, kind, "", func(cur *Record) (Change, error) {
		prev = nil
		if cur == nil {
			return Change{}, nil
		}
		if cur.Seen.Live {
			return Change{}, &notDeadError{kind: kind, rec: cur}
		}
		prev = cur
		return Change{Op: OpDelete, Event: &Event{Event: EventReap, Kind: kind, Previous: cur}}, nil
	}, nil)
	if err != nil || prev == nil {
		return nil, err
	}
	return prev, nil
}

// notDeadError refuses a reap; it matches ErrNotDead and carries the record.
type notDeadError struct {
	kind string
	rec  *Record
}

func (e *notDeadError) Error() string {
	return fmt.Sprintf("lease %s is live, held by %q until %s; only a dead lease can be reaped", e.kind, e.rec.Owner, FormatTime(e.rec.Seen.ExpiresAt))
}

func (e *notDeadError) Is(target error) bool { return target == ErrNotDead }

// LiveRecord returns the live record behind a refusal from Acquire or Reap.
func LiveRecord(err error) *Record {
	var held *HeldError
	if errors.As(err, &held) {
		return held.Record
	}
	var nd *notDeadError
	if errors.As(err, &nd) {
		return nd.rec
	}
	return nil
}

func compactJSON(p json.RawMessage) json.RawMessage {
	if len(p) == 0 || string(p) == "null" {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, p) != nil {
		return p
	}
	return b.Bytes()
}
