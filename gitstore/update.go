package gitstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// maxRounds bounds the compare-and-swap rounds of one Update.
const maxRounds = 64

// Update implements [lease.Backend.Update] by compare-and-swap rounds.
func (b *Backend) Update(ctx context.Context, kind string, fn func(cur *lease.Record) (lease.Change, error)) (*lease.Record, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	pending := newAttempts()
	for round := 1; ; round++ {
		if pending.unknown >= maxUnknown {
			return nil, fmt.Errorf("%w: %s: the outcome of %d writes to %s is unknown: the remote answers reads but not pushes", ErrUnreachable, b.loc, pending.unknown, kind)
		}
		// The journal's tip comes with the lease's: a change that
		// records an event pushes both.
		t, jtip, err := b.load(ctx, kind, true)
		if err != nil {
			return nil, err
		}
		if w := pending.writes[t.sha]; w != nil {
			// A push whose outcome was unknown, and whose ref read
			// unchanged afterwards, has landed since: it was still on
			// its way. It is this update's success.
			return b.landed(kind, t.sha, w), nil
		}
		ch, err := fn(t.rec)
		if err != nil {
			return nil, err
		}
		rec, done, err := b.apply(ctx, kind, t, jtip, ch, pending)
		if err != nil || done {
			return rec, err
		}
		if round == maxRounds {
			return nil, fmt.Errorf("gitstore: %s: gave up after %d conflicting updates", kind, round)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("gitstore: %s: %w", kind, err)
		}
	}
}

// UpdateReadsFirst implements [lease.ReadingUpdater]: Update takes no
// lock; it fetches, and pushes only a change.
func (b *Backend) UpdateReadsFirst() bool { return true }

var _ lease.ReadingUpdater = (*Backend)(nil)

// apply tries to commit ch over t (and its event over the journal's tip
// jtip) once. done is false when the round was
// lost (or its outcome was settled as not made) and fn must decide again.
// Every push not confirmed is noted in pending, by the commit it would
// have put on ps[0]'s ref.
func (b *Backend) apply(ctx context.Context, kind string, t tip, jtip string, ch lease.Change, pending *attempts) (*lease.Record, bool, error) {
	var ps []push
	var rec *lease.Record
	var files map[string][]byte
	fence := t.fence
	switch ch.Op {
	case lease.OpNone:
	case lease.OpAcquire:
		if ch.Record == nil || ch.Record.Corrupt || ch.Record.Token == "" {
			return nil, true, fmt.Errorf("gitstore: %s: acquire needs a whole record with a token", kind)
		}
		fence++
		r := *ch.Record
		rec = &r
	case lease.OpRenew:
		switch {
		case ch.Record == nil || ch.Record.Corrupt:
			return nil, true, fmt.Errorf("gitstore: %s: renew needs a whole record", kind)
		case t.rec == nil:
			return nil, true, fmt.Errorf("%w: %s has no record to renew", lease.ErrNotHeld, kind)
		case t.rec.Corrupt || !t.rec.Seen.Live || !t.holder.IsZero() && b.clock.Now().After(t.holder):
			return nil, true, fmt.Errorf("%w: the lease %s has lapsed; it is never revived", lease.ErrExpired, kind)
		case ch.Record.Token != t.rec.Token:
			return nil, true, fmt.Errorf("%w: a renewal of %s must keep its token", lease.ErrNotOwner, kind)
		}
		r := *ch.Record
		rec = &r
	case lease.OpDelete:
		if t.rec == nil && ch.Event == nil {
			return nil, true, nil
		}
		if t.rec != nil {
			files = map[string][]byte{"fence": []byte(strconv.FormatInt(fence, 10) + "\n"), "released": []byte("true\n")}
		}
	default:
		return nil, true, fmt.Errorf("gitstore: %s: unknown operation %d", kind, ch.Op)
	}
	stamped := rec != nil && t.srv.known()
	if rec != nil {
		rec.Kind = kind
		if stamped {
			stampServer(rec, t.srv, ch.Op == lease.OpAcquire)
		}
		data, err := rec.EncodeFile()
		if err != nil {
			return nil, true, fmt.Errorf("gitstore: %s: %w", kind, err)
		}
		files = map[string][]byte{"fence": []byte(strconv.FormatInt(fence, 10) + "\n"), "record.json": data}
		if stamped {
			files["clock"] = []byte(clockServer)
		}
	}
	var lc string
	if files != nil {
		msg := fmt.Sprintf("durable-lease %s %s fence %d\n", opName(ch.Op), kind, fence)
		c, err := b.commit(ctx, t.sha, files, msg)
		if err != nil {
			return nil, true, fmt.Errorf("gitstore: %s: %w", kind, err)
		}
		lc = c
		ps = append(ps, push{b.leaseRef(kind), t.sha, c})
	}
	var jc string
	if ch.Event != nil {
		if jtip == badJournal {
			return nil, true, fmt.Errorf("gitstore: the journal %s is not a commit: durable-lease did not write it; check it, then delete it (git push <remote> :%s)", b.JournalRef(), b.JournalRef())
		}
		e := *ch.Event
		if e.At.IsZero() {
			e.At = b.Now()
		}
		line, err := e.MarshalJSON()
		if err != nil {
			return nil, true, fmt.Errorf("gitstore: journal: %w", err)
		}
		if jc, err = b.commit(ctx, jtip, map[string][]byte{"event.json": append(line, '\n')}, string(line)+"\n"); err != nil {
			return nil, true, fmt.Errorf("gitstore: journal: %w", err)
		}
		ps = append(ps, push{b.JournalRef(), jtip, jc})
	}
	if len(ps) == 0 {
		return nil, true, nil
	}
	w := &write{rec: rec, fence: fence, sent: b.Now(), sentStamp: b.obs.now(), srv: t.srv, stamped: stamped}
	// Whatever the push reports, a later read that finds this commit on
	// the tip means it landed: a refusal is no proof that it did not
	// (over HTTP the transport resends a request whose reply was lost on
	// a reused connection, and the resent copy loses to the first).
	pending.writes[ps[0].commit] = w
	err := b.push(ctx, ps)
	if errors.Is(err, errLost) {
		return nil, false, nil
	}
	if err != nil {
		// The outcome is unknown: settle it by reading the ref again.
		// With the caller's deadline: past it the outcome stays
		// unknown, which is what the caller is told.
		now, rerr := b.tipOf(ctx, ps[0].ref)
		switch {
		case rerr != nil:
			return nil, true, fmt.Errorf("%w: %s: the outcome of a write to %s is unknown: %v", ErrUnreachable, b.loc, kind, err)
		case now == ps[0].commit:
			// Ours: the atomic push made every update.
		case now == ps[0].old:
			// Not made yet; decide again (it is still ours if it
			// turns up on the tip after all).
			pending.unknown++
			if err := backoff(ctx, 1); err != nil {
				return nil, true, err
			}
			return nil, false, nil
		default:
			// Another writer's commit: lost. Decide again.
			return nil, false, nil
		}
	}
	return b.landed(kind, lc, w), true, nil
}

// maxUnknown is how many pushes of one update may end with an unknown
// outcome (each up to CallTimeout, then a read) before it gives up as
// unavailable: a remote that answers reads but never a push.
const maxUnknown = 3

// attempts are an update's pushes not confirmed, by the commit each
// would have put on its ref, and how many ended with an unknown outcome.
type attempts struct {
	writes  map[string]*write
	unknown int
}

func newAttempts() *attempts { return &attempts{writes: map[string]*write{}} }

// write is a push made: what it wrote and when.
type write struct {
	rec       *lease.Record // nil for a tombstone or a journal entry alone
	fence     int64
	sent      time.Time
	sentStamp stamp
	srv       serverTime // of the read it was decided on
	stamped   bool       // rec's times are the server's
}

// landed is the record of w, confirmed on kind's ref as commit lc.
func (b *Backend) landed(kind, lc string, w *write) *lease.Record {
	if w.rec == nil {
		return nil
	}
	b.obs.confirm(kind, lc, w.sentStamp)
	rec := w.rec
	rec.Fence = w.fence
	rec.Seen = lease.Liveness{ExpiresAt: w.sent.Add(rec.TTL()), Rule: RulePatience}
	if w.stamped {
		// The server's clock was behind srv.date+1s when the read was
		// sent, so it reaches the record's expiry no sooner than this,
		// on ours.
		rec.Seen = lease.Liveness{ExpiresAt: w.srv.at.Add(rec.TTL() - time.Second), Rule: RuleServerDate}
	}
	// Slow rounds (or a TTL under the server rule's second) can leave a
	// confirmed write already lapsed.
	rec.Seen.Live = !b.clock.Now().After(rec.Seen.ExpiresAt)
	return rec
}

func opName(op lease.Op) string {
	switch op {
	case lease.OpAcquire:
		return "acquire"
	case lease.OpRenew:
		return "renew"
	case lease.OpDelete:
		return "release"
	}
	return "journal"
}
