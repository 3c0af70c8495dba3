package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxAttempts bounds the optimistic retries of one [Backend.Update]: each
// conflict means another client committed a change of the kind meanwhile,
// so running out takes that many commits by others within one call.
const maxAttempts = 64

// Update reads kind's keys, calls fn with the record, and commits fn's
// Change in one transaction that compares the mod revisions read; when
// another client changed the kind in between, it calls fn again with what
// that transaction found. fn must be pure (it may run several times).
//
//   - OpAcquire grants an etcd lease with the record's TTL in whole seconds,
//     rounded up, and at least the cluster's minimum (the record's
//     TTLMinutes is then the TTL granted), and writes the record, the fence
//     key and the liveness key (bound to that etcd lease) together; the
//     fence is the transaction's revision.
//   - OpRenew keeps the current etcd lease alive, then rewrites the record
//     if its keys are unchanged. It fails with an error matching
//     [lease.ErrExpired] when the etcd lease has lapsed or the liveness key
//     is gone: a lapsed lease is never revived. The TTL stays the one
//     granted at acquire.
//   - OpDelete deletes the three keys, then revokes the etcd lease.
//
// A Change's event is written in the same transaction. Update returns the
// stored record, with its fence and liveness, after OpAcquire and OpRenew.
func (b *Backend) Update(ctx context.Context, kind string, fn func(cur *lease.Record) (lease.Change, error)) (*lease.Record, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	g := &grant{b: b}
	defer g.release(ctx)
	st, err := b.load(ctx, kind)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		ch, err := fn(st.rec)
		if err != nil {
			return nil, err
		}
		rec, next, err := b.commit(ctx, kind, st, ch, g)
		if err != nil || next == nil {
			if err == nil && ch.Event != nil {
				b.prunedNowAndThen(ctx, b.loc.Prefix+journalDir, keepJournal)
			}
			return rec, err
		}
		if attempt == maxAttempts {
			return nil, fmt.Errorf("etcdstore: %s: gave up after %d conflicting updates", kind, attempt)
		}
		// Another client committed first: decide again on what it left.
		if err := pause(ctx, attempt); err != nil {
			return nil, fmt.Errorf("etcdstore: %s: %w", kind, err)
		}
		if err := b.judge(ctx, kind, next); err != nil {
			return nil, err
		}
		st = next
	}
}

// pause backs off a little after a conflict, more after repeated ones.
func pause(ctx context.Context, attempt int) error {
	if attempt == 1 {
		return ctx.Err()
	}
	t := time.NewTimer(rand.N(time.Duration(min(attempt, 20)) * time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// commit makes ch over st. It returns the stored record, or, when the
// transaction's compares failed, the state the cluster had then.
func (b *Backend) commit(ctx context.Context, kind string, st *state, ch lease.Change, g *grant) (*lease.Record, *state, error) {
	var ops []clientv3.Op
	if ch.Event != nil {
		e := *ch.Event
		key, val, err := b.journalEntry(&e)
		if err != nil {
			return nil, nil, err
		}
		ops = append(ops, clientv3.OpPut(key, val))
	}
	p := b.kindPrefix(kind)
	switch ch.Op {
	case lease.OpNone:
		if len(ops) == 0 {
			return nil, nil, nil
		}
		next, err := b.txn(ctx, kind, "journal", st, ops)
		return nil, next, err
	case lease.OpAcquire:
		return b.acquire(ctx, kind, st, ch.Record, g, ops)
	case lease.OpRenew:
		return b.renew(ctx, kind, st, ch.Record, ops)
	case lease.OpDelete:
		if st.record == nil && st.fence == nil && st.live == nil && len(ops) == 0 {
			return nil, nil, nil
		}
		ops = append(ops, clientv3.OpDelete(p+recordName), clientv3.OpDelete(p+fenceName), clientv3.OpDelete(p+liveName))
		next, err := b.txn(ctx, kind, "delete", st, ops)
		if err == nil && next == nil && st.live != nil && st.live.Lease != 0 {
			b.revoke(ctx, clientv3.LeaseID(st.live.Lease))
		}
		return nil, next, err
	}
	return nil, nil, fmt.Errorf("etcdstore: %s: unknown operation %d", kind, ch.Op)
}

func (b *Backend) acquire(ctx context.Context, kind string, st *state, in *lease.Record, g *grant, ops []clientv3.Op) (*lease.Record, *state, error) {
	if in == nil || in.Corrupt || in.Token == "" {
		return nil, nil, fmt.Errorf("etcdstore: %s: acquire needs a whole record with a token", kind)
	}
	rec := *in
	rec.Kind = kind
	secs := ttlSeconds(rec.TTLMinutes)
	if err := g.get(ctx, kind, secs); err != nil {
		return nil, nil, err
	}
	if float64(g.granted) != rec.TTLMinutes*60 {
		rec.TTLMinutes = float64(g.granted) / 60
	}
	val, err := encodeRecord(&rec)
	if err != nil {
		return nil, nil, fmt.Errorf("etcdstore: %s: %w", kind, err)
	}
	fp := lease.TokenFingerprint(rec.Token)
	p := b.kindPrefix(kind)
	ops = append(ops,
		clientv3.OpPut(p+recordName, val),
		clientv3.OpPut(p+fenceName, fp),
		clientv3.OpPut(p+liveName, fp, clientv3.WithLease(g.id)))
	var rev int64
	// Sent again when unanswered (a proposal made while the cluster
	// elects a leader is dropped without a word): if the first one was
	// committed after all, the second's compares fail, and the keys it
	// finds are this acquisition's own, its random token and its grant.
	next, err := b.txnRev(ctx, kind, "acquire", st, ops, &rev, forever)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// The etcd lease lapsed while this Update retried: grant another.
		g.id = 0
		next, err = b.fetch(ctx, kind)
	}
	if err == nil && next != nil && next.rec != nil && next.rec.Token == rec.Token &&
		next.live != nil && clientv3.LeaseID(next.live.Lease) == g.id && next.fence != nil {
		next, rev = nil, next.fence.ModRevision
	}
	if err != nil || next != nil {
		return nil, next, err
	}
	g.used = true
	if st.live != nil && st.live.Lease != 0 && clientv3.LeaseID(st.live.Lease) != g.id {
		// The replaced holder's etcd lease has lapsed, or belongs to a
		// record that could not be read; its key now points at ours.
		b.revoke(ctx, clientv3.LeaseID(st.live.Lease))
	}
	rec.Fence = rev
	rec.Seen = lease.Liveness{Live: true, ExpiresAt: g.at.Add(time.Duration(g.granted) * time.Second), Rule: RuleLease}
	return &rec, nil, nil
}

func (b *Backend) renew(ctx context.Context, kind string, st *state, in *lease.Record, ops []clientv3.Op) (*lease.Record, *state, error) {
	cur := st.rec
	switch {
	case in == nil || in.Corrupt:
		return nil, nil, fmt.Errorf("etcdstore: %s: renew needs a whole record", kind)
	case cur == nil:
		return nil, nil, fmt.Errorf("%w: %s has no record to renew", lease.ErrNotHeld, kind)
	case cur.Corrupt || !cur.Seen.Live:
		return nil, nil, fmt.Errorf("%w: the etcd lease of %s has lapsed; it is never revived", lease.ErrExpired, kind)
	case in.Token != cur.Token:
		return nil, nil, fmt.Errorf("%w: a renewal of %s must keep its token", lease.ErrNotOwner, kind)
	}
	id := clientv3.LeaseID(st.live.Lease)
	at := b.Now()
	var ttl int64
	err := b.retrying(ctx, "renew "+kind, cur.Seen.ExpiresAt, func(ctx context.Context) error {
		resp, err := b.cli.KeepAliveOnce(ctx, id)
		if err == nil {
			ttl = resp.TTL
		}
		return err
	})
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// The etcd lease lapsed (or was revoked) since the read, which
		// deleted the liveness key: decide again on what is there now.
		// fn then sees the record expired, gone or another's; a lapsed
		// lease is never revived.
		next, err := b.fetch(ctx, kind)
		return nil, next, err
	}
	if err != nil {
		return nil, nil, err
	}
	rec := *in
	rec.Kind = kind
	rec.TTLMinutes = cur.TTLMinutes
	val, err := encodeRecord(&rec)
	if err != nil {
		return nil, nil, fmt.Errorf("etcdstore: %s: %w", kind, err)
	}
	ops = append(ops, clientv3.OpPut(b.kindPrefix(kind)+recordName, val))
	// A renewal may be sent again when unanswered: if the first one was
	// committed, the second's compares fail and the caller decides again
	// on the record it wrote (its own, renewed).
	var rev int64
	next, err := b.txnRev(ctx, kind, "renew", st, ops, &rev, cur.Seen.ExpiresAt)
	if err != nil || next != nil {
		return nil, next, err
	}
	rec.Fence = cur.Fence
	rec.Seen = lease.Liveness{Live: true, ExpiresAt: at.Add(time.Duration(ttl) * time.Second), Rule: RuleLease}
	return &rec, nil, nil
}

func (b *Backend) txn(ctx context.Context, kind, what string, st *state, ops []clientv3.Op) (*state, error) {
	var rev int64
	return b.txnRev(ctx, kind, what, st, ops, &rev, time.Time{})
}

// txnRev commits ops if kind's keys are as in st, and sets *rev to the
// transaction's revision. When they are not, it returns what they are.
// With resend set (the expiry of the lease a renewal keeps, or forever),
// an attempt left unanswered is sent again ([Backend.retrying]); only a
// transaction whose second commit is harmless (its compares fail) and
// whose caller can tell its own first commit from another's may set it.
func (b *Backend) txnRev(ctx context.Context, kind, what string, st *state, ops []clientv3.Op, rev *int64, resend time.Time) (*state, error) {
	var resp *clientv3.TxnResponse
	commit := func(ctx context.Context) (err error) {
		resp, err = b.cli.Txn(ctx).
			If(b.unchanged(kind, st)...).
			Then(ops...).
			Else(clientv3.OpGet(b.kindPrefix(kind), clientv3.WithPrefix())).
			Commit()
		return err
	}
	var err error
	switch {
	case resend.IsZero():
		err = b.request(ctx, what+" "+kind, commit)
	case resend.Equal(forever):
		err = b.retrying(ctx, what+" "+kind, time.Time{}, commit)
	default:
		err = b.retrying(ctx, what+" "+kind, resend, commit)
	}
	if err != nil {
		return nil, err
	}
	if resp.Succeeded {
		*rev = resp.Header.Revision
		return nil, nil
	}
	return b.parseState(kind, resp.Responses[0].GetResponseRange().Kvs), nil
}

// forever, as txnRev's resend, sends a transaction again with no lease's
// expiry to keep to.
var forever = time.Unix(1<<62, 0)

// revoke ends an etcd lease whose keys are gone or point elsewhere. A
// failure is left alone: the lease lapses by itself at its TTL, and
// nothing depends on it any more.
func (b *Backend) revoke(ctx context.Context, id clientv3.LeaseID) {
	_ = b.request(ctx, "revoke", func(ctx context.Context) error {
		_, err := b.cli.Revoke(ctx, id)
		return err
	})
}

// ttlSeconds is an etcd lease TTL for a record TTL: whole seconds, rounded
// up, at least 1 (the cluster raises it to its own minimum).
func ttlSeconds(minutes float64) int64 {
	s := math.Ceil(minutes * 60)
	switch {
	case !(s >= 1):
		return 1
	case s > math.MaxInt32:
		return math.MaxInt32
	}
	return int64(s)
}

// grant is an etcd lease granted for an acquire, kept across retries of
// one Update and revoked at its end unless a transaction used it.
type grant struct {
	b       *Backend
	id      clientv3.LeaseID
	asked   int64
	granted int64
	at      time.Time
	used    bool
}

func (g *grant) get(ctx context.Context, kind string, secs int64) error {
	if g.id != 0 && g.asked == secs {
		return nil
	}
	g.release(ctx)
	at := g.b.Now()
	var resp *clientv3.LeaseGrantResponse
	// Sent again when unanswered: a grant that was made after all, and
	// never learnt of, binds no key and lapses at its TTL.
	err := g.b.retrying(ctx, "acquire "+kind+": grant", time.Time{}, func(ctx context.Context) (err error) {
		resp, err = g.b.cli.Grant(ctx, secs)
		return err
	})
	if err != nil {
		return err
	}
	g.id, g.asked, g.granted, g.at = resp.ID, secs, resp.TTL, at
	return nil
}

// release revokes an unused grant, even when ctx has ended (within the
// request bound).
func (g *grant) release(ctx context.Context) {
	if g.id != 0 && !g.used {
		g.b.revoke(context.WithoutCancel(ctx), g.id)
	}
	g.id = 0
}
