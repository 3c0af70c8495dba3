package lease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Work names where a holder's work runs on its host: a cgroup of its own
// (Linux, cgroup v2), which pool-run makes before the work's first
// instruction. It is kept in the record as the additive field "work", so
// that whoever takes the lease over, reaps it or releases it can end what
// the holder left running there before the lease changes hands: the
// kernel knows every process of the cgroup, whatever happened to the
// processes that supervised it.
type Work struct {
	// Cgroup is the cgroup's path in the v2 hierarchy ("/" first, as
	// /proc/PID/cgroup shows it).
	Cgroup string `json:"cgroup"`
	// ID is the cgroup's id (its directory's inode number): a cgroup made
	// again at the same path is another one.
	ID uint64 `json:"id"`
	// Boot is the kernel's boot id (/proc/sys/kernel/random/boot_id) of
	// the host the cgroup is on: on any other host, or after a reboot,
	// the work is out of reach (there the fence is the answer).
	Boot string `json:"boot"`
	// NS is the writer's cgroup namespace (the inode of
	// /proc/self/ns/cgroup), to which Cgroup is relative; 0 when unknown.
	NS uint64 `json:"ns,omitempty"`
}

// WorkBinding is what the cgroup of rec's work must say it holds (its
// extended attribute user.durable-lease, which only who may write the
// cgroup can set) for a successor to end it: the kind and the token's
// fingerprint of that very incarnation. A record that names some other
// cgroup, planted or rewritten by whoever can write the store, names a
// cgroup without it, or with another incarnation's.
func WorkBinding(kind, token string) string { return kind + " " + TokenFingerprint(token) }

// WorkOn is the [Work] of the cgroup at path with id on this host, in this
// process's cgroup namespace ns.
func WorkOn(path string, id, ns uint64) *Work {
	return &Work{Cgroup: path, ID: id, Boot: hostBootID(), NS: ns}
}

// workField is the record's field for [Work].
const workField = "work"

// Work is the work the record names, or nil when it names none (or names
// it in a form this package does not write: another tool's field).
func (r *Record) Work() *Work {
	if r == nil || r.Corrupt {
		return nil
	}
	raw, ok := r.Extra[workField]
	if !ok {
		return nil
	}
	var w Work
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if dec.Decode(&w) != nil || !strings.HasPrefix(w.Cgroup, "/") || w.ID == 0 || w.Boot == "" {
		return nil
	}
	return &w
}

// setWork names w in the record.
func (r *Record) setWork(w *Work) {
	if w == nil {
		return
	}
	data, err := json.Marshal(w)
	if err != nil {
		return
	}
	if r.Extra == nil {
		r.Extra = map[string]json.RawMessage{}
	}
	r.Extra[workField] = data
}

// ErrWorkRunning reports that the work of the lease's previous holder
// still runs on this host and could not be ended, so the lease was not
// handed on: the holder's cgroup belongs to another user, or its
// processes survived SIGKILL. Nothing changed.
var ErrWorkRunning = errors.New("lease: the previous holder's work still runs")

// EventWorkEnded is the journal event of a predecessor's work ended
// before its lease changed hands.
const EventWorkEnded = "work_ended"

// workEnder finds out whether a record's work still runs on this host and
// ends it. Running is called inside a backend's critical section and must
// only read; End is called outside it.
type workEnder interface {
	// Running reports whether rec's work w still has a cgroup on this
	// host that belongs to rec (bound to its incarnation, owned by its
	// writer): processes in it, or none yet but room for the holder to
	// start some, which a successor fences as well.
	Running(w *Work, rec *Record) (bool, error)
	// End kills every process of w, waits until none is left, and
	// removes the cgroup; it says how many processes there were.
	End(ctx context.Context, w *Work, rec *Record) (int, error)
}

// endsWork is [ErrWorkRunning]'s twin inside an update: the change would
// hand on a record whose work still runs, and nothing was changed.
type endsWork struct{ w *Work }

func (e *endsWork) Error() string { return "the previous holder's work still runs in " + e.w.Cgroup }

// handsOn reports the work a change would take away from its holder: a
// record replaced by another incarnation, or removed.
func handsOn(cur *Record, ch Change) *Work {
	if cur == nil || cur.Corrupt {
		return nil
	}
	switch {
	case ch.Op == OpDelete:
	case ch.Op == OpAcquire && ch.Record != nil && ch.Record.Token != cur.Token:
	default:
		return nil
	}
	return cur.Work()
}

// maxEnds bounds how often one change ends a predecessor's work and
// tries again: each try ends what it found, so a second is needed only if
// the work was made anew meanwhile, which nobody without the lease does.
const maxEnds = 3

// update is the backend's Update for every change that can take a lease
// from its holder: before such a change commits, whatever the holder's
// work left running on this host is ended (outside the critical section,
// since a kill takes milliseconds), journaled as work_ended by by, and
// the change decided again. A work that cannot be ended refuses the
// change with ErrWorkRunning.
func (s *Store) update(ctx context.Context, kind, by string, fn func(cur *Record) (Change, error),
	update func(context.Context, string, func(*Record) (Change, error)) (*Record, error)) (*Record, error) {
	if update == nil {
		update = s.b.Update
	}
	for tries := 0; ; tries++ {
		var running *Work
		var prev *Record
		rec, err := update(ctx, kind, func(cur *Record) (Change, error) {
			running, prev = nil, cur
			ch, err := fn(cur)
			if err != nil || s.ender == nil {
				return ch, err
			}
			w := handsOn(cur, ch)
			if w == nil {
				return ch, nil
			}
			live, err := s.ender.Running(w, cur)
			if err != nil {
				return Change{}, fmt.Errorf("%w: %s: %v", ErrWorkRunning, kind, err)
			}
			if live {
				running = w
				return Change{}, &endsWork{w}
			}
			return ch, nil
		})
		var ew *endsWork
		if !errors.As(err, &ew) {
			return rec, err
		}
		if tries == maxEnds {
			return nil, fmt.Errorf("%w: %s: its cgroup %s was populated again after being ended %d times", ErrWorkRunning, kind, running.Cgroup, tries)
		}
		n, err := s.ender.End(ctx, running, prev)
		if err != nil {
			return nil, fmt.Errorf("%w: %s (held by %q): %v", ErrWorkRunning, kind, prev.Owner, err)
		}
		_ = s.b.Journal(ctx, Event{Event: EventWorkEnded, Kind: kind, By: by, Previous: prev,
			Reason: fmt.Sprintf("ended %d process(es) left in cgroup %s, and removed it, before the lease changed hands", n, running.Cgroup)})
	}
}
