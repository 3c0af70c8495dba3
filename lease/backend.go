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
	// OpAcquire stores Change.Record as a new incarnation of the lease (an
	// acquire, or a takeover of a dead record): the backend assigns its
	// fence, larger than any the kind had, and starts its expiry.
	OpAcquire
	// OpRenew stores Change.Record as the same incarnation with a new
	// heartbeat: the backend keeps its fence and extends its expiry.
	OpRenew
	// OpDelete removes the record.
	OpDelete
)

// Change is what an update callback decides: the operation, the record to
// store, and the journal event that records it. The backend commits the
// event and the change together (on the directory store the event is
// appended first, inside the critical section; a change whose event cannot
// be written is not made).
type Change struct {
	Op     Op
	Record *Record
	Event  *Event
}

// Backend keeps lease records, decides their liveness and commits one
// kind's read-modify-write atomically. [Store] holds the lease semantics
// (tokens, owner fence, who may do what); a backend stores records, judges
// whether each is live on its own clock, assigns fences, and serializes
// changes, so another place to keep leases slots in behind [New] without
// touching callers.
//
// Every record a backend returns has Seen (its liveness when read, on the
// backend's clock) and Fence set.
type Backend interface {
	// Read returns the current record of kind without taking the critical
	// section, or nil when there is none. It never returns a torn record.
	Read(ctx context.Context, kind string) (*Record, error)
	// Update calls fn with the current record (nil when there is none) and
	// commits the Change it returns, atomically with respect to every other
	// Update of kind; if fn returns an error nothing is changed. fn may be
	// called more than once (a backend may retry on a conflict, or call it
	// first outside the critical section), so it must have no effects of
	// its own: everything it wants done goes in the Change. Update returns
	// the stored record after an OpAcquire or OpRenew (with its fence and
	// liveness), else nil.
	Update(ctx context.Context, kind string, fn func(cur *Record) (Change, error)) (*Record, error)
	// Names lists the record names present, sorted. Names that are not
	// valid kinds (files of another tool) are included; the Store reports
	// them and never touches them.
	Names(ctx context.Context) ([]string, error)
	// Journal appends one event to the store's journal on its own.
	Journal(ctx context.Context, e Event) error
	// Now is the backend's clock, for the times written into records.
	Now() time.Time
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
