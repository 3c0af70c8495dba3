package pool_test

import (
	"context"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
	"github.com/durable-lease/durable-lease/provision"
)

// Was a bug (reset.go Reset, provision.go whileHolding): Reset checked the
// holder with a lock-free status read and first heartbeat a quarter TTL
// later, so a reset started near the end of the TTL let the lease lapse
// mid-reset; the next waiter's sweep reaped it and provisioned the slot while
// the reset still ran. The reset must renew the lease before it starts.
func TestRegressionResetRenewsBeforeItRuns(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, `{"ttlMinutes":1,"reset":"wipe --slot","slots":[{"id":1}]}`, pool.Options{})
	g := tp.mustAcquire(t, "agent-7")
	tp.clock.Advance(59 * time.Second) // one second left
	var stateMidReset lease.State
	tp.runner.SetFail(func(ctx context.Context, c call) error {
		if c.Action == provision.ActionReset {
			tp.clock.Advance(30 * time.Second) // a reset that takes half a minute
			stateMidReset = tp.slotState(t, "1")
		}
		return nil
	})
	if _, err := tp.Reset(context.Background(), "1", "agent-7", g.Token); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if stateMidReset != lease.Held {
		t.Errorf("slot state during the reset = %s, want held: the lease must be renewed before the reset runs", stateMidReset)
	}
}

// Was a bug (acquire.go, poolcli): a --wait-ms deadline also bounded the
// provisioning that followed a grant won just before it, killing the
// provisioner and reporting an internal error. The wait bounds the queue
// only.
func TestRegressionWaitBoundsOnlyTheQueue(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, `{"provision":"slow --slot","slots":[{"id":1}]}`, pool.Options{})
	tp.runner.SetFail(func(ctx context.Context, c call) error {
		select {
		case <-time.After(300 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	g, err := tp.Acquire(context.Background(), pool.AcquireRequest{Owner: "agent-7", Wait: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("Acquire with a 50 ms wait on a free slot and a 300 ms provision: %v", err)
	}
	if g.Owner != "agent-7" {
		t.Errorf("grant owner = %q", g.Owner)
	}
}
