package lease

import (
	"context"
	"encoding/json"
	"time"
)

// Op says what an [Backend.Update] callback wants done with the record.
type Op int

const (
	// OpNone leaves the record as it is.
	OpNone Op = iota
	// OpPut stores the returned record, replacing any current one.
	OpPut
	// OpDelete removes the record.
	OpDelete
)

// Backend keeps lease records and makes one kind's read-modify-write atomic.
// [Store] holds all lease semantics (expiry, tokens, owner fence, takeover);
// a backend only stores bytes and serializes mutations, so another place to
// keep leases slots in behind [New] without touching callers.
type Backend interface {
	// Read returns the current record of kind without taking the critical
	// section, or nil when there is none. It never returns a torn record.
	Read(kind string) (*Record, error)
	// Update runs fn inside kind's critical section with the current record
	// (nil when there is none) and applies the Op it returns; if fn returns
	// an error nothing is changed. A backend that knows there is no record
	// (no store yet) may first run fn with nil outside the section, so fn
	// must act on a record only when it is given one.
	Update(ctx context.Context, kind string, fn func(cur *Record) (Op, *Record, error)) error
	// Names lists the record names present, sorted. Names that are not
	// valid kinds (files of another tool) are included; the Store reports
	// them and never touches them.
	Names() ([]string, error)
	// Journal appends one event to the store's journal.
	Journal(e Event) error
}

// Watcher is implemented by backends that can report changes to a kind's
// record, so a waiter wakes as soon as a lease is released instead of at the
// next poll. Events may be spurious; a waiter always re-reads.
type Watcher interface {
	// Watch delivers a value on the channel after kind's record may have
	// changed, until ctx is done. Missed values coalesce.
	Watch(ctx context.Context, kind string) (<-chan struct{}, error)
}

// Event is one line of the journal (reaped.log): a takeover, a reap, a
// forced release, or a guard recovered from a dead holder.
type Event struct {
	At       time.Time `json:"-"`
	Event    string    `json:"event"`
	Kind     string    `json:"kind"`
	By       string    `json:"by,omitempty"`
	Previous *Record   `json:"previous,omitempty"`
	// Guard fields, for guard_reaped and guard_lost events.
	Guard  string `json:"guard,omitempty"`
	Holder string `json:"holderId,omitempty"`
	PID    int    `json:"pid,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Journal event names, as written to reaped.log.
const (
	EventTakeover     = "takeover"
	EventReap         = "reap"
	EventForceRelease = "force_release"
	EventGuardReaped  = "guard_reaped"
	EventGuardLost    = "guard_lost"
)

// MarshalJSON writes "at" first, as the reference journal does.
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event
	body, err := json.Marshal(plain(e))
	if err != nil {
		return nil, err
	}
	at, _ := json.Marshal(FormatTime(e.At))
	out := append([]byte(`{"at":`), at...)
	if len(body) > 2 {
		out = append(out, ',')
	}
	return append(out, body[1:]...), nil
}
