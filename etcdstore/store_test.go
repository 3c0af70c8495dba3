package etcdstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
	"github.com/durable-lease/durable-lease/lease"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestLifecycle walks one lease through acquire, renew and release and
// checks the keys of docs/PROTOCOL.md §8 at each step.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	b := open(t, c, etcdstore.Options{})
	ctx := context.Background()
	raw := c.Client()
	p := "/" + testPrefix(t) + "/lease/baton/"

	if rec, err := b.Read(ctx, "baton"); err != nil || rec != nil {
		t.Fatalf("Read of a free kind = %v, %v; want nil, nil", rec, err)
	}
	got, err := acquire(ctx, b, "baton", "agent-1", 15)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if got.Fence <= 0 || !got.Seen.Live || got.Seen.Rule != etcdstore.RuleLease || got.TTLMinutes != 15 {
		t.Fatalf("acquired %+v; want a fence, live by %q, TTL 15", got, etcdstore.RuleLease)
	}
	if left := time.Until(got.Seen.ExpiresAt); left < 14*time.Minute || left > 15*time.Minute {
		t.Errorf("ExpiresAt in %s; want about 15 min", left)
	}

	kvs, err := raw.Get(ctx, p, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]int{}
	for i, kv := range kvs.Kvs {
		keys[strings.TrimPrefix(string(kv.Key), p)] = i
	}
	if len(keys) != 3 {
		t.Fatalf("keys under %s: %v; want record, fence, live", p, keys)
	}
	record, fence, live := kvs.Kvs[keys["record"]], kvs.Kvs[keys["fence"]], kvs.Kvs[keys["live"]]
	if fp := lease.TokenFingerprint(got.Token); string(fence.Value) != fp || string(live.Value) != fp {
		t.Errorf("fence %q, live %q; want both %q", fence.Value, live.Value, fp)
	}
	if record.Lease != 0 || fence.Lease != 0 || live.Lease == 0 {
		t.Errorf("leases: record %x fence %x live %x; want only live bound", record.Lease, fence.Lease, live.Lease)
	}
	if record.ModRevision != got.Fence || fence.ModRevision != got.Fence || live.ModRevision != got.Fence {
		t.Errorf("mod revisions %d %d %d; want all the fence %d", record.ModRevision, fence.ModRevision, live.ModRevision, got.Fence)
	}
	if !strings.HasSuffix(string(record.Value), "}\n") || !strings.Contains(string(record.Value), "\n  \"owner\": \"agent-1\"") {
		t.Errorf("record value is not the directory store's file form:\n%s", record.Value)
	}
	if dec := lease.DecodeRecord("baton", record.Value); dec.Corrupt || dec.Token != got.Token {
		t.Errorf("record value decodes to %+v", dec)
	}

	read, err := b.Read(ctx, "baton")
	if err != nil || read.Token != got.Token || read.Fence != got.Fence || !read.Seen.Live {
		t.Fatalf("Read = %+v, %v; want the acquired record, live, same fence", read, err)
	}
	if names, err := b.Names(ctx); err != nil || !slices.Equal(names, []string{"baton"}) {
		t.Errorf("Names = %v, %v", names, err)
	}

	time.Sleep(5 * time.Millisecond) // a later heartbeat
	renewed, err := renew(ctx, b, "baton", got.Token)
	if err != nil {
		t.Fatalf("renew: %v", err)
	}
	if renewed.Fence != got.Fence || !renewed.Seen.Live || !renewed.Heartbeat.After(got.Heartbeat) {
		t.Errorf("renewed %+v; want the same fence, live, a later heartbeat", renewed)
	}
	read, _ = b.Read(ctx, "baton")
	if read.Fence != got.Fence || !read.Heartbeat.Equal(renewed.Heartbeat) {
		t.Errorf("after renew Read = fence %d heartbeat %v; want %d %v", read.Fence, read.Heartbeat, got.Fence, renewed.Heartbeat)
	}

	if err := release(ctx, b, "baton", got.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
	if rec, err := b.Read(ctx, "baton"); err != nil || rec != nil {
		t.Fatalf("Read after release = %v, %v", rec, err)
	}
	if n, _ := raw.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithCountOnly()); n.Count != 0 {
		t.Errorf("%d keys left under %s", n.Count, p)
	}
	if resp, err := raw.TimeToLive(ctx, clientv3.LeaseID(live.Lease)); err == nil && resp.TTL > 0 {
		t.Errorf("etcd lease %x not revoked: TTL %d", live.Lease, resp.TTL)
	}
	if names, _ := b.Names(ctx); len(names) != 0 {
		t.Errorf("Names after release = %v", names)
	}
}

// TestTTLRounding: a TTL below the cluster's minimum (and a fraction of a
// second) is raised to the TTL the cluster grants, and the record says so.
func TestTTLRounding(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	b := open(t, c, etcdstore.Options{})
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		ask  float64
		want float64
	}{
		{"below the minimum", 0.001, etcdtest.MinLeaseTTL.Minutes()},
		{"fraction of a second", 2.5 / 60, 3.0 / 60},
		{"whole seconds", 0.5, 0.5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kind := strings.ReplaceAll(tt.name, " ", "-")
			got, err := acquire(ctx, b, kind, "agent-1", tt.ask)
			if err != nil {
				t.Fatal(err)
			}
			read, _ := b.Read(ctx, kind)
			if got.TTLMinutes != tt.want || read.TTLMinutes != tt.want {
				t.Errorf("TTLMinutes: returned %v, stored %v; want %v", got.TTLMinutes, read.TTLMinutes, tt.want)
			}
		})
	}
}

// TestRenewAfterExpiryFails: once the cluster has expired a holder's etcd
// lease, the record stays visible as expired, a renewal fails with
// ErrExpired even when the callback insists, and nothing revives it.
func TestRenewAfterExpiryFails(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	b := open(t, c, etcdstore.Options{})
	ctx := context.Background()
	wake, err := b.Watch(ctx, "short")
	if err != nil {
		t.Fatal(err)
	}
	held, err := acquire(ctx, b, "short", "agent-1", 0.001)
	if err != nil {
		t.Fatal(err)
	}
	// The cluster deletes the liveness key when it expires the etcd lease.
	waitWake(t, wake, 10*time.Second, "the etcd lease's TTL")
	rec, err := b.Read(ctx, "short")
	if err != nil || rec == nil || rec.Seen.Live || rec.Token != held.Token || rec.Fence != held.Fence {
		t.Fatalf("Read after expiry = %+v, %v; want the record, not live, its fence", rec, err)
	}
	if _, err := renew(ctx, b, "short", held.Token); !errors.Is(err, lease.ErrExpired) {
		t.Errorf("renew = %v; want ErrExpired", err)
	}
	// A callback that renews whatever it is given still fails.
	_, err = b.Update(ctx, "short", func(cur *lease.Record) (lease.Change, error) {
		next := *cur
		next.Heartbeat = b.Now()
		return lease.Change{Op: lease.OpRenew, Record: &next}, nil
	})
	if !errors.Is(err, lease.ErrExpired) {
		t.Errorf("forced renew = %v; want ErrExpired", err)
	}
	if rec, _ := b.Read(ctx, "short"); rec == nil || rec.Seen.Live {
		t.Errorf("after the renewals Read = %+v; want still expired", rec)
	}
	// A takeover gets a larger fence and journals in its transaction.
	next, err := acquire(ctx, b, "short", "agent-2", 15)
	if err != nil || next.Fence <= held.Fence {
		t.Fatalf("takeover = %+v, %v; want a fence above %d", next, err, held.Fence)
	}
	j, err := c.Client().Get(ctx, "/"+testPrefix(t)+"/journal/", clientv3.WithPrefix())
	if err != nil || len(j.Kvs) != 1 {
		t.Fatalf("journal = %v, %v; want one event", j, err)
	}
	var ev struct{ Event, Kind, By string }
	if err := json.Unmarshal(j.Kvs[0].Value, &ev); err != nil || ev.Event != lease.EventTakeover || ev.By != "agent-2" || j.Kvs[0].CreateRevision != next.Fence {
		t.Errorf("journal event %s at revision %d; want a takeover by agent-2 at %d", j.Kvs[0].Value, j.Kvs[0].CreateRevision, next.Fence)
	}
	if !strings.HasPrefix(string(j.Kvs[0].Value), `{"at":"`) {
		t.Errorf("journal line %s; want \"at\" first", j.Kvs[0].Value)
	}
}
