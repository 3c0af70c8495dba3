package lease

import (
	"context"
	"errors"
	"time"
)

// State is what a reader can say about a lease.
type State string

const (
	// Free means there is no record.
	Free State = "free"
	// Held means a record with a fresh heartbeat.
	Held State = "held"
	// Unknown means a record past its TTL, or one that cannot be read. It is
	// neither held nor safely free: reap it or acquire over it, loudly.
	Unknown State = "unknown"
	// Invalid marks a .json file in the store whose name is not a lease kind;
	// it belongs to some other tool and is reported, never touched.
	Invalid State = "invalid"
)

// Status is a lock-free reading of one lease.
type Status struct {
	Kind   string
	State  State
	Record *Record
	// ExpiresAt is when a held lease expires, or when an unknown one did
	// (zero for a corrupt record and for free).
	ExpiresAt time.Time
	// Remaining is the time left on a held lease; negative when expired.
	Remaining time.Duration
	// Rule is the judgement rule that decided the state ([Liveness.Rule]);
	// empty for free and invalid entries.
	Rule string
	// ReadErr is why the entry could not be read at all (a permission
	// denied, an I/O error); the entry is then Unknown, and reconcile
	// reports it without touching it.
	ReadErr error
}

// Status reads kind's lease without taking its critical section.
func (s *Store) Status(ctx context.Context, kind string) (*Status, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	rec, err := s.b.Read(ctx, kind)
	if err != nil {
		return nil, err
	}
	return s.judge(kind, rec), nil
}

// Peek is [Store.Status] for a caller that never looks at the record's
// Fence (a pool judging which slots are free): on a backend that keeps the
// fence apart from the record (the directory store), it is not read, and
// Record.Fence is then 0.
func (s *Store) Peek(ctx context.Context, kind string) (*Status, error) {
	p, ok := s.b.(Peeker)
	if !ok {
		return s.Status(ctx, kind)
	}
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	rec, err := p.Peek(ctx, kind)
	if err != nil {
		return nil, err
	}
	return s.judge(kind, rec), nil
}

func (s *Store) judge(kind string, rec *Record) *Status {
	st := &Status{Kind: kind, State: Free, Record: rec}
	if rec == nil {
		return st
	}
	now, lv := s.b.Now(), rec.Seen
	st.State, st.Rule = Held, lv.Rule
	if !lv.Live {
		st.State = Unknown
	}
	if !rec.Corrupt {
		st.ExpiresAt = lv.ExpiresAt
		st.Remaining = st.ExpiresAt.Sub(now)
		if lv.Live {
			// Judged live a moment ago on the backend's clock (etcd counts
			// whole seconds, rounded down): held is never "expired by"
			// the time it took to get here.
			st.Remaining = max(st.Remaining, 0)
		}
	}
	return st
}

// List reads every lease in the store, sorted by kind. Files whose names
// are not kinds come back with State Invalid; an entry that cannot be read
// comes back Unknown with ReadErr set, and the others are still listed.
func (s *Store) List(ctx context.Context) ([]Status, error) {
	names, err := s.b.Names(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Status, 0, len(names))
	for _, n := range names {
		if !ValidKind(n) {
			out = append(out, Status{Kind: n, State: Invalid})
			continue
		}
		rec, err := s.b.Read(ctx, n)
		if err != nil {
			// One bad entry must not hide the rest of the store.
			out = append(out, Status{Kind: n, State: Unknown, ReadErr: err,
				Record: &Record{Kind: n, Corrupt: true, Reason: "unreadable: " + err.Error()}})
			continue
		}
		if rec == nil {
			continue // released while listing
		}
		out = append(out, *s.judge(n, rec))
	}
	return out, nil
}

// Report is the outcome of [Store.Reconcile].
type Report struct {
	// Held are live leases of owners inside the fence.
	Held []Status
	// Reaped are the dead records removed, inside the fence or unreadable.
	Reaped []*Record
	// Foreign are records outside the owner fence, and files that are not
	// leases: reported, never touched.
	Foreign []Status
}

// Reconcile sweeps the store at session start: it removes the temporaries
// of operations whose process died (see [Sweeper]), reaps dead leases whose
// owner is inside the fence (and unreadable records, which have no owner to
// fence), reports live ones, and reports without touching any record whose
// owner is outside the fence.
func (s *Store) Reconcile(ctx context.Context) (*Report, error) {
	all, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	rep := &Report{Held: []Status{}, Reaped: []*Record{}, Foreign: []Status{}}
	if sw, ok := s.b.(Sweeper); ok {
		sw.Sweep("") // what dead operations left behind
	}
	for _, st := range all {
		if st.State == Invalid || st.ReadErr != nil {
			rep.Foreign = append(rep.Foreign, st)
			continue
		}
		inFence := st.Record.Corrupt || s.opts.owners.Match(st.Record.Owner)
		if !inFence {
			rep.Foreign = append(rep.Foreign, st)
			continue
		}
		if st.State == Held {
			rep.Held = append(rep.Held, st)
			continue
		}
		prev, err := s.Reap(ctx, st.Kind)
		switch {
		case errors.Is(err, ErrNotDead):
			if now, err := s.Status(ctx, st.Kind); err == nil && now.State == Held {
				rep.Held = append(rep.Held, *now) // re-acquired during the sweep
			}
		case err != nil:
			return rep, err
		case prev != nil:
			rep.Reaped = append(rep.Reaped, prev)
		}
	}
	return rep, nil
}
