package etcdstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The key layout under the store's prefix P (docs/PROTOCOL.md §8):
//
//	P/lease/<kind>/record   the record JSON, persistent
//	P/lease/<kind>/fence    the token's fingerprint; its mod revision is the fence
//	P/lease/<kind>/live     the token's fingerprint, bound to the etcd lease
//	P/journal/<time>-<rnd>  one journal event (reaped.log's line); the newest
//	                        10 000 are kept
//	P/pool/<name>/...       a pool's state (pool.go)
const (
	leasesDir  = "/lease/"
	journalDir = "/journal/"
	recordName = "record"
	fenceName  = "fence"
	liveName   = "live"
)

// RuleLease is the [lease.Liveness] rule of this backend: the etcd lease
// bound to the record's liveness key decided.
const RuleLease = "etcd"

func (b *Backend) kindPrefix(kind string) string { return b.loc.Prefix + leasesDir + kind + "/" }

// state is what one read of a kind's keys found, at one revision.
type state struct {
	record, fence, live *mvccpb.KeyValue
	rec                 *lease.Record
}

func modRev(kv *mvccpb.KeyValue) int64 {
	if kv == nil {
		return 0
	}
	return kv.ModRevision
}

func (b *Backend) parseState(kind string, kvs []*mvccpb.KeyValue) *state {
	st := &state{}
	p := b.kindPrefix(kind)
	for _, kv := range kvs {
		switch strings.TrimPrefix(string(kv.Key), p) {
		case recordName:
			st.record = kv
		case fenceName:
			st.fence = kv
		case liveName:
			st.live = kv
		}
	}
	if st.record != nil {
		st.rec = lease.DecodeRecord(kind, st.record.Value)
	}
	return st
}

// unchanged are the compares that make a transaction commit only over the
// state it was decided on: each of the kind's keys has the mod revision
// read (0: still absent).
func (b *Backend) unchanged(kind string, st *state) []clientv3.Cmp {
	p := b.kindPrefix(kind)
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(p+recordName), "=", modRev(st.record)),
		clientv3.Compare(clientv3.ModRevision(p+fenceName), "=", modRev(st.fence)),
		clientv3.Compare(clientv3.ModRevision(p+liveName), "=", modRev(st.live)),
	}
}

// load reads kind's keys and judges the record.
func (b *Backend) load(ctx context.Context, kind string) (*state, error) {
	st, err := b.fetch(ctx, kind)
	if err != nil {
		return nil, err
	}
	return st, b.judge(ctx, kind, st)
}

// fetch reads kind's keys, one linearizable read.
func (b *Backend) fetch(ctx context.Context, kind string) (*state, error) {
	var resp *clientv3.GetResponse
	err := b.retrying(ctx, "read "+kind, time.Time{}, func(ctx context.Context) (err error) {
		resp, err = b.cli.Get(ctx, b.kindPrefix(kind), clientv3.WithPrefix())
		return err
	})
	if err != nil {
		return nil, err
	}
	return b.parseState(kind, resp.Kvs), nil
}

// judge sets the fence and the liveness of st.rec. The record is live
// while its liveness key exists, names the record's token, and the etcd
// lease it is bound to has time left by the cluster's count. Its fence is
// the fence key's mod revision, when that key names the record's token.
func (b *Backend) judge(ctx context.Context, kind string, st *state) error {
	rec := st.rec
	if rec == nil {
		return nil
	}
	if rec.Corrupt {
		rec.Seen = lease.Liveness{Rule: lease.RuleCorrupt}
		return nil
	}
	fp := []byte(lease.TokenFingerprint(rec.Token))
	if st.fence != nil && bytes.Equal(st.fence.Value, fp) {
		rec.Fence = st.fence.ModRevision
	}
	now := b.Now()
	lapsed := lease.Liveness{ExpiresAt: now, Rule: RuleLease}
	if at := rec.ExpiresAt(); at.Before(now) {
		lapsed.ExpiresAt = at
	}
	if st.live == nil || st.live.Lease == 0 || !bytes.Equal(st.live.Value, fp) {
		rec.Seen = lapsed
		return nil
	}
	ttl, err := b.timeToLive(ctx, kind, clientv3.LeaseID(st.live.Lease))
	if err != nil {
		return err
	}
	if ttl < 0 {
		rec.Seen = lapsed
		return nil
	}
	// TTL counts whole seconds left, rounded down; 0 is less than a
	// second left (or lapsed and about to be revoked, which deletes the
	// liveness key): live until the key goes.
	rec.Seen = lease.Liveness{Live: true, ExpiresAt: now.Add(time.Duration(ttl) * time.Second), Rule: RuleLease}
	return nil
}

// timeToLive is the cluster's count of whole seconds left on the etcd
// lease id, or -1 when it has lapsed or is gone.
func (b *Backend) timeToLive(ctx context.Context, kind string, id clientv3.LeaseID) (int64, error) {
	var ttl int64
	err := b.retrying(ctx, "read "+kind+": lease time to live", time.Time{}, func(ctx context.Context) error {
		resp, err := b.cli.TimeToLive(ctx, id)
		if err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				ttl = -1
				return nil
			}
			return err
		}
		ttl = resp.TTL // -1 from servers that answer "not found" so (3.4)
		return nil
	})
	return ttl, err
}

// Read returns kind's record judged by the cluster, or nil when there is
// none.
func (b *Backend) Read(ctx context.Context, kind string) (*lease.Record, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	st, err := b.load(ctx, kind)
	if err != nil {
		return nil, err
	}
	return st.rec, nil
}

// Names lists the kinds that have a record under the prefix, sorted.
func (b *Backend) Names(ctx context.Context) ([]string, error) {
	var resp *clientv3.GetResponse
	dir := b.loc.Prefix + leasesDir
	err := b.retrying(ctx, "list", time.Time{}, func(ctx context.Context) (err error) {
		resp, err = b.cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		return err
	})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, kv := range resp.Kvs {
		name, ok := strings.CutSuffix(strings.TrimPrefix(string(kv.Key), dir), "/"+recordName)
		if ok && name != "" && !strings.Contains(name, "/") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// Journal writes one event under P/journal/.
func (b *Backend) Journal(ctx context.Context, e lease.Event) error {
	key, val, err := b.journalEntry(&e)
	if err != nil {
		return err
	}
	err = b.request(ctx, "journal "+e.Event, func(ctx context.Context) error {
		_, err := b.cli.Put(ctx, key, val)
		return err
	})
	if err == nil {
		b.prunedNowAndThen(ctx, b.loc.Prefix+journalDir, keepJournal)
	}
	return err
}

// journalEntry is the key and value of an event: the key sorts by the
// writer's clock and is unique by its random suffix; readers order by
// the keys' create revisions, which is the order of the commits.
func (b *Backend) journalEntry(e *lease.Event) (string, string, error) {
	if e.At.IsZero() {
		e.At = b.Now()
	}
	val, err := json.Marshal(*e)
	if err != nil {
		return "", "", fmt.Errorf("etcdstore: journal %s: %w", e.Event, err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	key := fmt.Sprintf("%s%s%016d-%s", b.loc.Prefix, journalDir, e.At.UnixMilli(), hex.EncodeToString(rnd[:]))
	return key, string(val), nil
}

// encodeRecord is the record key's value: the record as the directory
// store writes its file (two-space indent, final newline).
func encodeRecord(r *lease.Record) (string, error) {
	compact, err := r.MarshalJSON()
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "", "  "); err != nil {
		return "", err
	}
	out.WriteByte('\n')
	return out.String(), nil
}

func checkKind(kind string) error {
	if !lease.ValidKind(kind) {
		return fmt.Errorf("%w: kind %q must match %s", lease.ErrInvalid, kind, lease.KindPattern)
	}
	return nil
}
