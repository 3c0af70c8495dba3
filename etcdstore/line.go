package etcdstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The line of a kind's waiters (docs/PROTOCOL.md §8.5):
//
//	P/wait/<kind>/<16 hex digits>   one waiter's place, empty, bound to an
//	                                etcd lease of placeTTL seconds that the
//	                                waiter keeps alive
//
// The places' create revisions are the line's order. Each waiter watches
// only the place just ahead of its own (etcd's election recipe), so a
// release wakes the head and no one else, and a waiter that stops loses
// its place when its etcd lease lapses, which wakes the one behind it.
const waitDir = "/wait/"

// placeTTL is the TTL of a place's etcd lease, in seconds: how long a
// stopped or cut-off waiter can keep the ones behind it waiting.
const placeTTL = 10

// lineRecheck is how often a waiter behind the head reads the record
// itself ([lease.Place.Recheck]). Places lapse by themselves, so this net
// is for what cannot happen (a place bound to no lease); it is long so
// that 100 idle waiters cost next to nothing.
const lineRecheck = 30 * time.Second

func (b *Backend) linePrefix(kind string) string { return b.loc.Prefix + waitDir + kind + "/" }

// LineUp implements [lease.WaitLiner]: it puts a place at the end of
// kind's line and watches the place ahead of it until there is none.
func (b *Backend) LineUp(ctx context.Context, kind string) (lease.Place, error) {
	if err := checkKind(kind); err != nil {
		return lease.Place{}, err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	key := b.linePrefix(kind) + hex.EncodeToString(rnd[:])
	var id clientv3.LeaseID
	var rev int64
	err := b.request(ctx, "line up for "+kind, func(ctx context.Context) error {
		g, err := b.cli.Grant(ctx, placeTTL)
		if err != nil {
			return err
		}
		id = g.ID
		put, err := b.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, "", clientv3.WithLease(id))).Commit()
		if err == nil && !put.Succeeded {
			err = fmt.Errorf("place %s exists", key)
		}
		if err == nil {
			rev = put.Header.Revision
		}
		return err
	})
	if err != nil {
		if id != 0 {
			b.revoke(context.WithoutCancel(ctx), id)
		}
		return lease.Place{}, err
	}
	lctx, cancel := context.WithCancel(ctx)
	alive, err := b.cli.KeepAlive(lctx, id)
	if err != nil {
		cancel()
		b.revoke(context.WithoutCancel(ctx), id)
		return lease.Place{}, fmt.Errorf("etcdstore: keep a place in the line of %s: %w", kind, err)
	}
	turn := make(chan error, 1)
	go func() {
		for range alive { // the client renews the lease every third of its TTL
		}
		// The place lapsed (the cluster was out of reach longer than its
		// TTL) or the waiter left: either way it is no longer in line.
		if lctx.Err() == nil {
			signalErr(turn, fmt.Errorf("etcdstore: the place in the line of %s lapsed", kind))
		}
	}()
	go func() {
		if err := b.awaitTurn(lctx, kind, rev); lctx.Err() == nil {
			signalErr(turn, err)
		}
	}()
	var once sync.Once
	leave := func() {
		once.Do(func() {
			cancel()
			// Revoking deletes the place, which wakes the one behind.
			b.revoke(context.WithoutCancel(ctx), id)
		})
	}
	return lease.Place{Turn: turn, Leave: leave, Recheck: lineRecheck}, nil
}

func signalErr(ch chan error, err error) {
	select {
	case ch <- err:
	default:
	}
}

// awaitTurn returns nil once no place created before rev (the waiter's
// own) is left in kind's line, or ctx's error. A read that fails (the
// cluster out of reach, or electing a leader) is tried again while ctx
// lasts: the place stays in the line as long as its etcd lease, and
// giving every waiter its turn at the first failure would make a herd of
// the whole line just as the cluster comes back.
func (b *Backend) awaitTurn(ctx context.Context, kind string, rev int64) error {
	dir := b.linePrefix(kind)
	for {
		var resp *clientv3.GetResponse
		err := b.request(ctx, "read the line of "+kind, func(ctx context.Context) (err error) {
			resp, err = b.cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
				clientv3.WithMaxCreateRev(rev-1), clientv3.WithLimit(1),
				clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend))
			return err
		})
		if err != nil {
			if !sleepCtx(ctx, b.opts.RequestTimeout/10) {
				return ctx.Err()
			}
			continue
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		deleted, err := b.awaitDeletes(ctx, dir, []string{string(resp.Kvs[0].Key)}, resp.Header.Revision+1)
		if err != nil {
			return err
		}
		if !deleted && !sleepCtx(ctx, b.opts.RequestTimeout/10) {
			return ctx.Err()
		}
	}
}

// maxWatchedKeys bounds the watches of one [Backend.awaitDeletes]: beyond
// it, one watch of the deletions under the keys' prefix, filtered here,
// costs the cluster less than a watch per key.
const maxWatchedKeys = 16

// awaitDeletes watches keys, all under prefix, from revision rev on and
// reports true once one of them is deleted, false when the watch ended
// first (a compaction, a leader lost: a deletion may have been missed, and
// the caller reads again), or ctx's error.
func (b *Backend) awaitDeletes(ctx context.Context, prefix string, keys []string, rev int64) (bool, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watched := map[string]bool{}
	for _, k := range keys {
		watched[k] = true
	}
	opts := []clientv3.OpOption{clientv3.WithFilterPut(), clientv3.WithRev(rev)}
	if len(keys) > maxWatchedKeys {
		keys, opts = []string{prefix}, append(opts, clientv3.WithPrefix())
	}
	out := make(chan bool, len(keys))
	for _, k := range keys {
		// WithRequireLeader: a member cut off from the leader ends the
		// watch instead of keeping it open and silent.
		wch := b.cli.Watch(clientv3.WithRequireLeader(wctx), k, opts...)
		go func() {
			for resp := range wch {
				if resp.Err() != nil || resp.Canceled || resp.CompactRevision > 0 {
					break
				}
				for _, ev := range resp.Events {
					if watched[string(ev.Kv.Key)] {
						out <- true
						return
					}
				}
			}
			out <- false
		}()
	}
	select {
	case deleted := <-out:
		return deleted, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}
