package etcdstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/durable-lease/durable-lease/pool"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A pool's state lives under P/pool/<name>/ (docs/PROTOCOL.md §8.4):
//
//	queue/<request id>   one queue entry (the entry JSON of queue.json),
//	                     bound to an etcd lease of waiterStaleMs
//	stats                {"durationsMs": [...]}, as stats.json
//	grants/<request id>  a grant document, bound to an etcd lease of 24 h
//	log/<ms>-<rnd>       one line of the pool's log
//	nudges/<ms>-<rnd>    one nudge line
const (
	poolsDir  = "/pool/"
	queueDir  = "queue/"
	grantsDir = "grants/"
	logDir    = "log/"
	nudgesDir = "nudges/"
	statsName = "stats"
)

// Bounds of the append-only prefixes: the oldest keys beyond them are
// deleted, checked about once every pruneEvery appends.
const (
	keepLog     = 10000
	keepNudges  = 1000
	keepJournal = 10000
	pruneEvery  = 64
)

// grantTTL is how long a grant document is kept for its claim.
const grantTTL = 24 * time.Hour

// PoolBackend implements [pool.BackendProvider]: the pool's queue, statistics,
// grants, log and nudges as keys under the store's prefix, its waiters
// woken by watches.
//
// A queue entry is bound to an etcd lease with the pool's waiterStaleMs
// (in whole seconds, rounded up, at least the cluster's minimum), kept
// alive by the waiter's heartbeat: a silent waiter's entry is deleted by
// the cluster, never judged by a client's clock. The queue's order is the
// entries' create revisions, the order in which the cluster committed
// them. Each change of the queue is one transaction that compares the mod
// revisions of the entries it changes or deletes and creates new ones only
// if absent, so no lock is needed.
func (b *Backend) PoolBackend(cfg *pool.Config, _ pool.Host) (pool.Backend, error) {
	if err := checkKind(cfg.Name); err != nil {
		return nil, err
	}
	return &poolBackend{b: b, prefix: b.loc.Prefix + poolsDir + cfg.Name + "/", stale: cfg.WaiterStale,
		where: b.loc.String() + poolsDir + cfg.Name}, nil
}

type poolBackend struct {
	b      *Backend
	prefix string
	stale  time.Duration
	where  string
}

func (s *poolBackend) Where() string { return s.where }

// queued is one queue key as read.
type queued struct {
	kv    *mvccpb.KeyValue
	entry pool.Entry
	ok    bool // the value is an entry under its own id
}

// readQueue reads the queue's keys in commit order.
func (s *poolBackend) readQueue(ctx context.Context) ([]queued, error) {
	var resp *clientv3.GetResponse
	err := s.b.retrying(ctx, "read the queue", time.Time{}, func(ctx context.Context) (err error) {
		resp, err = s.b.cli.Get(ctx, s.prefix+queueDir, clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]queued, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		q := queued{kv: kv}
		id := strings.TrimPrefix(string(kv.Key), s.prefix+queueDir)
		// An entry is only ever written bound to its own etcd lease (a key
		// without one, planted or restored, would never lapse and would
		// stand at the head of the queue forever): anything else is not an
		// entry, and the next change of the queue deletes it.
		q.ok = kv.Lease != 0 && json.Unmarshal(kv.Value, &q.entry) == nil && q.entry.ID == id && pool.CheckRequestID(id) == nil
		out = append(out, q)
	}
	return out, nil
}

func (s *poolBackend) Queue(ctx context.Context) ([]pool.Entry, int, error) {
	qs, err := s.readQueue(ctx)
	if err != nil {
		return nil, 0, err
	}
	live, bad := make([]pool.Entry, 0, len(qs)), 0
	for _, q := range qs {
		if q.ok {
			live = append(live, q.entry)
		} else {
			bad++
		}
	}
	return live, bad, nil
}

// maxQueueAttempts bounds the optimistic retries of one UpdateQueue; each
// conflict is another waiter's change committed in between.
const maxQueueAttempts = 64

// UpdateQueue commits fn's queue as one transaction: entries fn changed
// are rewritten (their etcd lease kept alive first: a heartbeat), entries
// it left out are deleted, new ones are created with an etcd lease of
// their own, each compared with what was read. Keys that are not entries
// are deleted too. On a conflict fn runs again on the queue as it is then.
// Entries of silent waiters are deleted by the cluster, so dropped is
// always empty.
func (s *poolBackend) UpdateQueue(ctx context.Context, _ string, fn func([]pool.Entry) ([]pool.Entry, error)) ([]pool.Entry, error) {
	fresh := map[string]clientv3.LeaseID{} // leases granted for new entries, kept across attempts
	defer func() {
		for _, id := range fresh {
			s.b.revoke(context.WithoutCancel(ctx), id)
		}
	}()
	for attempt := 1; ; attempt++ {
		qs, err := s.readQueue(ctx)
		if err != nil {
			return nil, err
		}
		live := make([]pool.Entry, 0, len(qs))
		read := make(map[string]queued, len(qs))
		for _, q := range qs {
			if q.ok {
				live = append(live, q.entry)
				read[q.entry.ID] = q
				if id, ok := fresh[q.entry.ID]; ok && clientv3.LeaseID(q.kv.Lease) == id {
					delete(fresh, q.entry.ID) // a commit of an earlier attempt made it: in use
				}
			}
		}
		next, err := fn(slices.Clone(live))
		if err != nil {
			return nil, err
		}
		var cmps []clientv3.Cmp
		var ops []clientv3.Op
		var renew, ended []clientv3.LeaseID
		kept := map[string]bool{}
		for _, e := range next {
			key := s.prefix + queueDir + e.ID
			val, err := json.Marshal(e)
			if err != nil {
				return nil, err
			}
			if q, ok := read[e.ID]; ok {
				kept[e.ID] = true
				if e == q.entry {
					continue
				}
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", q.kv.ModRevision))
				ops = append(ops, clientv3.OpPut(key, string(val), clientv3.WithLease(clientv3.LeaseID(q.kv.Lease))))
				renew = append(renew, clientv3.LeaseID(q.kv.Lease))
				continue
			}
			if err := pool.CheckRequestID(e.ID); err != nil {
				return nil, err
			}
			id, ok := fresh[e.ID]
			if !ok {
				if id, err = s.grant(ctx, s.entryTTL()); err != nil {
					return nil, err
				}
				fresh[e.ID] = id
			}
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
			ops = append(ops, clientv3.OpPut(key, string(val), clientv3.WithLease(id)))
		}
		for _, q := range qs {
			if q.ok && kept[q.entry.ID] {
				continue
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(string(q.kv.Key)), "=", q.kv.ModRevision))
			ops = append(ops, clientv3.OpDelete(string(q.kv.Key)))
			if q.kv.Lease != 0 {
				ended = append(ended, clientv3.LeaseID(q.kv.Lease))
			}
		}
		if len(ops) == 0 {
			return nil, nil
		}
		lapsed := false
		for _, id := range renew {
			if err := s.keepAlive(ctx, id); errors.Is(err, rpctypes.ErrLeaseNotFound) {
				lapsed = true // the cluster dropped the entry meanwhile: decide again
			} else if err != nil {
				return nil, err
			}
		}
		if !lapsed {
			// Sent again when unanswered: if the first one was committed
			// after all, the second's compares fail, and the queue read
			// next has its changes (fn decides again on them).
			var resp *clientv3.TxnResponse
			err = s.b.retrying(ctx, "update the queue", time.Time{}, func(ctx context.Context) (err error) {
				resp, err = s.b.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
				return err
			})
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				// A new entry's lease lapsed between retries: grant anew.
				clear(fresh)
			} else if err != nil {
				return nil, err
			} else if resp.Succeeded {
				for _, e := range next {
					delete(fresh, e.ID) // in use now
				}
				for _, id := range ended {
					s.b.revoke(context.WithoutCancel(ctx), id)
				}
				return nil, nil
			}
		}
		if attempt == maxQueueAttempts {
			return nil, fmt.Errorf("%w: %d conflicting changes of the queue in a row", pool.ErrQueueBusy, attempt)
		}
		if err := pause(ctx, attempt); err != nil {
			return nil, fmt.Errorf("etcdstore: update the queue: %w", err)
		}
	}
}

// entryTTL is the etcd lease TTL of a queue entry: waiterStaleMs in whole
// seconds, rounded up.
func (s *poolBackend) entryTTL() int64 {
	return max(1, int64(math.Ceil(s.stale.Seconds())))
}

func (s *poolBackend) grant(ctx context.Context, secs int64) (clientv3.LeaseID, error) {
	var id clientv3.LeaseID
	// Sent again when unanswered; a grant made after all binds no key
	// and lapses at its TTL.
	err := s.b.retrying(ctx, "grant an etcd lease", time.Time{}, func(ctx context.Context) error {
		resp, err := s.b.cli.Grant(ctx, secs)
		if err == nil {
			id = resp.ID
		}
		return err
	})
	return id, err
}

func (s *poolBackend) keepAlive(ctx context.Context, id clientv3.LeaseID) error {
	return s.b.retrying(ctx, "keep a queue entry alive", time.Time{}, func(ctx context.Context) error {
		_, err := s.b.cli.KeepAliveOnce(ctx, id)
		return err
	})
}

type statsDoc struct {
	DurationsMs []float64 `json:"durationsMs"`
}

func (s *poolBackend) stats(ctx context.Context) (statsDoc, int64, error) {
	st := statsDoc{DurationsMs: []float64{}}
	var resp *clientv3.GetResponse
	err := s.b.retrying(ctx, "read the statistics", time.Time{}, func(ctx context.Context) (err error) {
		resp, err = s.b.cli.Get(ctx, s.prefix+statsName)
		return err
	})
	if err != nil {
		return st, 0, err
	}
	if len(resp.Kvs) == 0 {
		return st, 0, nil
	}
	_ = json.Unmarshal(resp.Kvs[0].Value, &st) // advisory: garbage reads as none
	if st.DurationsMs == nil {
		st.DurationsMs = []float64{}
	}
	return st, resp.Kvs[0].ModRevision, nil
}

func (s *poolBackend) Holds(ctx context.Context) ([]float64, error) {
	st, _, err := s.stats(ctx)
	return st.DurationsMs, err
}

func (s *poolBackend) AddHold(ctx context.Context, _ string, ms float64, keep int) error {
	key := s.prefix + statsName
	for attempt := 1; ; attempt++ {
		st, rev, err := s.stats(ctx)
		if err != nil {
			return err
		}
		st.DurationsMs = append(st.DurationsMs, ms)
		if n := len(st.DurationsMs); n > keep {
			st.DurationsMs = st.DurationsMs[n-keep:]
		}
		val, _ := json.MarshalIndent(st, "", "  ") // as stats.json
		val = append(val, '\n')
		var resp *clientv3.TxnResponse
		err = s.b.request(ctx, "record a hold time", func(ctx context.Context) (err error) {
			resp, err = s.b.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
				Then(clientv3.OpPut(key, string(val))).Commit()
			return err
		})
		if err != nil || resp.Succeeded {
			return err
		}
		if attempt == maxQueueAttempts {
			return fmt.Errorf("%w: %d conflicting changes of the statistics in a row", pool.ErrQueueBusy, attempt)
		}
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
}

func (s *poolBackend) PutGrant(ctx context.Context, id string, doc []byte) error {
	if err := pool.CheckRequestID(id); err != nil {
		return err
	}
	lid, err := s.grant(ctx, int64(grantTTL/time.Second))
	if err != nil {
		return err
	}
	err = s.b.retrying(ctx, "write the grant of "+id, time.Time{}, func(ctx context.Context) error { // the same put twice is one
		_, err := s.b.cli.Put(ctx, s.prefix+grantsDir+id, string(doc), clientv3.WithLease(lid))
		return err
	})
	if err != nil {
		s.b.revoke(context.WithoutCancel(ctx), lid)
	}
	return err
}

func (s *poolBackend) Grant(ctx context.Context, id string) ([]byte, error) {
	if err := pool.CheckRequestID(id); err != nil {
		return nil, err
	}
	var resp *clientv3.GetResponse
	err := s.b.retrying(ctx, "read the grant of "+id, time.Time{}, func(ctx context.Context) (err error) {
		resp, err = s.b.cli.Get(ctx, s.prefix+grantsDir+id)
		return err
	})
	if err != nil || len(resp.Kvs) == 0 {
		return nil, err
	}
	return resp.Kvs[0].Value, nil
}

// SweepGrants does nothing: a grant's key is bound to an etcd lease of
// 24 h, and the cluster deletes it then.
func (s *poolBackend) SweepGrants(context.Context, time.Duration) {}

func (s *poolBackend) AppendLog(ctx context.Context, line []byte) error {
	return s.b.appendLine(ctx, "log", s.prefix+logDir, line, keepLog)
}

func (s *poolBackend) AppendNudge(ctx context.Context, line []byte) error {
	return s.b.appendLine(ctx, "nudge", s.prefix+nudgesDir, line, keepNudges)
}

func (s *poolBackend) Log(ctx context.Context) ([][]byte, error) {
	var resp *clientv3.GetResponse
	err := s.b.retrying(ctx, "read the log", time.Time{}, func(ctx context.Context) (err error) {
		resp, err = s.b.cli.Get(ctx, s.prefix+logDir, clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		return err
	})
	if err != nil {
		return nil, err
	}
	lines := make([][]byte, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		lines[i] = kv.Value
	}
	return lines, nil
}

// appendKey is a new key under dir: the writer's clock in milliseconds,
// zero-padded so that keys sort by it, and a random suffix that makes it
// unique.
func (b *Backend) appendKey(dir string) string {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return fmt.Sprintf("%s%016d-%s", dir, b.Now().UnixMilli(), hex.EncodeToString(rnd[:]))
}

// appendLine writes one line under dir and now and then prunes dir to
// its newest keep keys.
func (b *Backend) appendLine(ctx context.Context, what, dir string, line []byte, keep int64) error {
	err := b.request(ctx, what, func(ctx context.Context) error {
		_, err := b.cli.Put(ctx, b.appendKey(dir), string(line))
		return err
	})
	if err == nil {
		b.prunedNowAndThen(ctx, dir, keep)
	}
	return err
}

// prunedNowAndThen prunes dir about once every pruneEvery calls: a count
// at every append would double its cost.
func (b *Backend) prunedNowAndThen(ctx context.Context, dir string, keep int64) {
	if mrand.N(pruneEvery) == 0 {
		b.prune(context.WithoutCancel(ctx), dir, keep)
	}
}

// prune deletes the oldest keys under dir (by key: by the writers' clocks)
// beyond the newest keep. It is best effort: a failure leaves them for
// the next prune.
func (b *Backend) prune(ctx context.Context, dir string, keep int64) {
	var count *clientv3.GetResponse
	if b.request(ctx, "prune", func(ctx context.Context) (err error) {
		count, err = b.cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err
	}) != nil || count.Count <= keep {
		return
	}
	var oldest *clientv3.GetResponse
	if b.request(ctx, "prune", func(ctx context.Context) (err error) {
		oldest, err = b.cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithLimit(count.Count-keep))
		return err
	}) != nil || len(oldest.Kvs) == 0 {
		return
	}
	end := string(oldest.Kvs[len(oldest.Kvs)-1].Key) + "\x00"
	_ = b.request(ctx, "prune", func(ctx context.Context) error {
		_, err := b.cli.Delete(ctx, dir, clientv3.WithRange(end))
		return err
	})
}

// Watch wakes the waiter: Slots on a deletion of one of the slots' keys
// (a release, a reap, or the cluster expiring a holder's etcd lease, which
// deletes its liveness key) while it listens, Queue when an entry joins or
// leaves the queue (not at every heartbeat). Both get a value after a
// watch had to be re-established.
func (s *poolBackend) Watch(ctx context.Context, slotKinds []string) (pool.Wakeups, func()) {
	return s.watch(ctx, slotKinds)
}

// WatchEntry is Watch for the waiter of one entry, which only needs to
// know when its turn may have come. It watches the keys of the entries
// just ahead of its own, never the whole queue (a watch of every change
// sent each heartbeat, and then each departure, to every waiter: with 100
// waiters, 100 events for each), and the slots only once the waiter
// listens to them (see [poolBackend.followAhead]).
func (s *poolBackend) WatchEntry(ctx context.Context, id string, slotKinds []string) (pool.Wakeups, func()) {
	slots, queue := make(chan struct{}, 1), make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(ctx)
	var listening atomic.Bool
	var mu sync.Mutex
	following := false
	listen := func(on bool) {
		listening.Store(on)
		if !on {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if following {
			return
		}
		if s.followSlots(ctx, slotKinds, &listening, slots) == nil {
			following = true
			// A release before the watch was confirmed would be missed:
			// the waiter tries once more now. (Without the watch, it tries
			// at its polls.)
			signal(slots)
		}
	}
	go s.followAhead(ctx, id, len(slotKinds), queue)
	return pool.Wakeups{Slots: slots, Queue: queue, Listen: listen}, cancel
}

// followAhead wakes the waiter of entry id (a value on queue) when it
// enters the front of the queue (its first nslots+[pool.FrontMargin]
// entries), when it could be granted a slot (among the first nslots), and
// then whenever an entry ahead of it leaves, until none is left; the
// slots' watch wakes it for a slot freed.
//
// The entries ahead of a waiter only ever leave (a new one is created
// behind every existing one, and the order is the create revision). So a
// waiter with i entries ahead of it gets fewer than k ahead only after one
// of the k entries just ahead of it has left: it watches those k keys
// alone (etcd's recipe, each waiter watching its predecessor, for k slots),
// and reads the queue's keys again when one is deleted. The entries just
// ahead of it leave when their own turn comes, so a waiter is woken about
// once on its way to the front: a departure at the head, a heartbeat, an
// entry joining behind it, none of them reaches it.
func (s *poolBackend) followAhead(ctx context.Context, id string, nslots int, queue chan struct{}) {
	dir := s.prefix + queueDir
	me := dir + id
	front := nslots + pool.FrontMargin
	for ctx.Err() == nil {
		var resp *clientv3.GetResponse
		err := s.b.retrying(ctx, "read the queue", time.Time{}, func(ctx context.Context) (err error) {
			resp, err = s.b.cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
				clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
			return err
		})
		if err != nil {
			signal(queue) // the waiter reads for itself, and reports what it finds
			if !sleepCtx(ctx, s.b.opts.RequestTimeout/10) {
				return
			}
			continue
		}
		var ahead []string
		found := false
		for _, kv := range resp.Kvs {
			if string(kv.Key) == me {
				found = true
				break
			}
			// A key that is not an entry (readQueue) counts here too: the
			// keys alone cannot tell, and counting it only wakes the
			// waiter later, never wrongly; the next change of the queue
			// deletes it.
			ahead = append(ahead, string(kv.Key))
		}
		if !found {
			signal(queue) // gone: its next attempt reports it
			return
		}
		watch := front
		switch idx := len(ahead); {
		case idx >= front:
		case idx >= nslots:
			watch = nslots
			signal(queue) // in the front: it re-checks at its polls from now on
		case idx == 0:
			signal(queue) // at the head: the slots' watch takes over
			return
		default:
			// It may be granted, and the slots' watch wakes it for a slot
			// freed; an entry ahead that leaves (given up, or lapsed) can
			// free a turn with no slot freed, so those keys stay watched.
			watch = idx
			signal(queue)
		}
		deleted, err := s.b.awaitDeletes(ctx, dir, ahead[len(ahead)-watch:], resp.Header.Revision+1)
		if err != nil {
			return
		}
		if !deleted {
			signal(queue) // something may have been missed
			if !sleepCtx(ctx, s.b.opts.RequestTimeout/10) {
				return
			}
		}
	}
}

// followSlots signals slots when one of the slots' keys is deleted while
// listening is set, and after the watch had to be re-established. It
// returns once the cluster has confirmed the watch.
func (s *poolBackend) followSlots(ctx context.Context, slotKinds []string, listening *atomic.Bool, slots chan struct{}) error {
	kinds := make(map[string]bool, len(slotKinds))
	for _, k := range slotKinds {
		kinds[k] = true
	}
	leases := s.b.loc.Prefix + leasesDir
	return s.b.follow(ctx, "watch the slots", leases, true, func(evs []*clientv3.Event) {
		for _, ev := range evs {
			kind, _, _ := strings.Cut(strings.TrimPrefix(string(ev.Kv.Key), leases), "/")
			if kinds[kind] && listening.Load() {
				signal(slots)
				return
			}
		}
		if evs == nil {
			signal(slots)
		}
	})
}

func (s *poolBackend) watch(ctx context.Context, slotKinds []string) (pool.Wakeups, func()) {
	slots, queue := make(chan struct{}, 1), make(chan struct{}, 1)
	listening := new(atomic.Bool)
	listening.Store(true)
	w := pool.Wakeups{Slots: slots, Queue: queue, Listen: func(on bool) { listening.Store(on) }}
	ctx, cancel := context.WithCancel(ctx)
	err := s.followSlots(ctx, slotKinds, listening, slots)
	if err == nil {
		err = s.b.follow(ctx, "watch the queue", s.prefix+queueDir, false, func(evs []*clientv3.Event) {
			for _, ev := range evs {
				if ev.Type == clientv3.EventTypeDelete || ev.IsCreate() {
					signal(queue)
					return
				}
			}
			if evs == nil {
				signal(queue)
			}
		})
	}
	if err != nil {
		cancel()
		return pool.Wakeups{Slots: make(chan struct{}), Queue: make(chan struct{}), Listen: func(bool) {}}, func() {}
	}
	return w, cancel
}

var _ pool.BackendProvider = (*Backend)(nil)

var _ pool.EntryWatcher = (*poolBackend)(nil)
