package etcdstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
	"github.com/durable-lease/durable-lease/lease"
)

// TestStoreOnEtcd runs lease.Store over the backend: the lease meanings
// hold with the cluster deciding liveness, and a waiter is woken by the
// watch when the holder releases.
func TestStoreOnEtcd(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	b := open(t, c, etcdstore.Options{})
	s, err := lease.New(b)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := lease.Request{Kind: "baton", Owner: "agent-1", TTLMinutes: 15}
	acq, err := s.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var held *lease.HeldError
	if _, err := s.Acquire(ctx, lease.Request{Kind: "baton", Owner: "agent-2", TTLMinutes: 15}); !errors.As(err, &held) {
		t.Fatalf("second acquire = %v; want held", err)
	}
	if rec, err := s.Heartbeat(ctx, lease.Ref{Kind: "baton", Owner: "agent-1", Token: acq.Record.Token}); err != nil || rec.Fence != acq.Record.Fence {
		t.Fatalf("heartbeat = %+v, %v", rec, err)
	}
	if _, err := s.Heartbeat(ctx, lease.Ref{Kind: "baton", Owner: "agent-1", Token: "wrong"}); !errors.Is(err, lease.ErrNotOwner) {
		t.Errorf("heartbeat with another token = %v; want ErrNotOwner", err)
	}

	got := make(chan error, 1)
	start := time.Now()
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		a, err := s.AcquireWait(wctx, lease.Request{Kind: "baton", Owner: "agent-2", TTLMinutes: 0.001})
		if err == nil && a.Record.Fence <= acq.Record.Fence {
			err = errors.New("the waiter's fence did not grow")
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the waiter wait
	released := time.Now()
	if _, err := s.Release(ctx, lease.Ref{Kind: "baton", Owner: "agent-1", Token: acq.Record.Token}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	t.Logf("waiter acquired %s after the release (%s after it began)", time.Since(released).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	// The waiter took a lease of the cluster's minimum TTL and does not
	// renew it: it expires on the server, reads as unknown, its heartbeat
	// fails, and the next acquire is a takeover.
	wake, err := b.Watch(ctx, "baton")
	if err != nil {
		t.Fatal(err)
	}
	waitWake(t, wake, 10*time.Second, "the waiter's etcd lease's TTL")
	st, err := s.Status(context.Background(), "baton")
	if err != nil || st.State != lease.Unknown {
		t.Fatalf("status after expiry = %+v, %v; want unknown", st, err)
	}
	if _, err := s.Heartbeat(ctx, lease.Ref{Kind: "baton", Owner: "agent-2", Token: st.Record.Token}); err == nil {
		t.Error("heartbeat of an expired lease succeeded")
	}
	next, err := s.Acquire(ctx, req)
	if err != nil || !next.TookOverExpired || next.Record.Fence <= st.Record.Fence {
		t.Fatalf("acquire after expiry = %+v, %v; want a takeover with a larger fence", next, err)
	}
}
