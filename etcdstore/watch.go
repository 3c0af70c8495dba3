package etcdstore

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Watch implements [lease.Watcher]: the channel gets a value when one of
// kind's keys is deleted (a release, a reap, a forced release, or the
// cluster revoking the etcd lease at expiry, which deletes the liveness
// key), and after the watch had to be re-established (an event may have
// been missed). Puts are filtered out on the server: a record written is
// a lease taken or renewed, which frees nothing, and waking every waiter
// at each renewal would make a herd. Watch returns once the cluster has
// confirmed the watch, so a release after it returns is never missed; the
// channel is never closed, and the watch ends with ctx.
func (b *Backend) Watch(ctx context.Context, kind string) (<-chan struct{}, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	wake := make(chan struct{}, 1)
	err := b.follow(ctx, "watch "+kind, b.kindPrefix(kind), true, func(evs []*clientv3.Event) {
		signal(wake)
	})
	if err != nil {
		return nil, err
	}
	return wake, nil
}

// signal puts a value on ch unless one is waiting there already.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// follow watches the keys under prefix (deletions only when deletesOnly)
// until ctx ends, calling on with each batch of events, and with nil
// once the watch had to be re-established and is again confirmed (events
// may have been missed meanwhile; none after that call is). It returns once the cluster has confirmed the watch, so a
// change after it returns is never missed, or an error when the cluster
// does not confirm it within the request bound.
func (b *Backend) follow(ctx context.Context, what, prefix string, deletesOnly bool, on func([]*clientv3.Event)) error {
	wch, stop, last, err := b.watch(ctx, what, prefix, deletesOnly, 0)
	if err != nil {
		return err
	}
	go func() {
		for {
			started := time.Now()
			compacted := false
			for resp := range wch {
				if resp.CompactRevision > 0 {
					compacted = true // the revision to resume from is gone
				}
				if resp.Err() != nil || resp.Canceled {
					break
				}
				for _, ev := range resp.Events {
					last = max(last, ev.Kv.ModRevision)
				}
				if len(resp.Events) > 0 {
					on(resp.Events)
				}
			}
			stop()
			if ctx.Err() != nil {
				return
			}
			// The watch ended without ctx (compaction, leader loss, a
			// cancel by the server): something may have been missed.
			// Resume after the last revision seen, unless it was compacted
			// away: then from now on (the on(nil) below stands for what was
			// missed). A watch that ends at once again and again is not
			// re-opened in a tight loop.
			from := last + 1
			if compacted {
				from = 0
			}
			if time.Since(started) < time.Second && !sleepCtx(ctx, b.opts.RequestTimeout/10) {
				return
			}
			for {
				var err error
				if wch, stop, last, err = b.watch(ctx, what, prefix, deletesOnly, from); err == nil {
					break
				}
				if !sleepCtx(ctx, b.opts.RequestTimeout/10) {
					return
				}
				from = 0 // perhaps compacted past it: watch from now on
			}
			// Told only now that the new watch is confirmed: a caller that
			// looks again on being told, then waits for an event, misses
			// no change made after its look.
			on(nil)
		}
	}()
	return nil
}

// sleepCtx waits d, or until ctx ends (then it returns false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// watch starts a watch of the keys under prefix from revision rev (0:
// now) and waits for the cluster to confirm it, within the request bound.
// It returns the revision the watch starts after, and the function that
// ends the watch.
func (b *Backend) watch(ctx context.Context, what, prefix string, deletesOnly bool, rev int64) (_ clientv3.WatchChan, _ context.CancelFunc, _ int64, err error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCreatedNotify()}
	if deletesOnly {
		opts = append(opts, clientv3.WithFilterPut())
	}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	wctx, cancel := context.WithCancel(ctx)
	// The client's Watch itself blocks while no endpoint answers: the
	// timer ends it by cancelling.
	timer := time.AfterFunc(b.opts.RequestTimeout, cancel)
	// WithRequireLeader: a member cut off from the leader ends the watch
	// instead of keeping it open and silent.
	wch := b.cli.Watch(clientv3.WithRequireLeader(wctx), prefix, opts...)
	resp, ok := <-wch
	switch {
	case !timer.Stop():
		err = fmt.Errorf("%w: %s: %s: not confirmed within %s", ErrUnreachable, b.loc, what, b.opts.RequestTimeout)
	case !ok:
		err = fmt.Errorf("etcdstore: %s: %w", what, context.Cause(wctx))
	case resp.Err() != nil:
		err = fmt.Errorf("etcdstore: %s: %w", what, resp.Err())
	case rev > 0:
		return wch, cancel, rev - 1, nil
	default:
		return wch, cancel, resp.Header.Revision, nil
	}
	cancel()
	return nil, nil, 0, err
}
