package pool_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
	"github.com/durable-lease/durable-lease/provision"
)

// TestGrantedRequestIsReportedGranted: a plumbing step naming a request
// that has left the queue with a slot says so, with the slot, while the
// slot is provisioned and once the grant is written, instead of saying
// the entry was dropped; a request whose grant failed gets the failure a
// claim reports. Another owner is refused all the while.
func TestGrantedRequestIsReportedGranted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	q, err := tp.Enqueue(ctx, "ci-alice", "", pool.ModeAsync)
	if err != nil {
		t.Fatal(err)
	}
	started, finish := make(chan struct{}), make(chan struct{})
	tp.runner.SetFail(func(ctx context.Context, c call) error {
		if c.Action == provision.ActionProvision {
			close(started)
			<-finish
		}
		return nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := tp.TryGrant(ctx, q.RequestID, "ci-alice")
		done <- err
	}()
	<-started
	want := func(what string, err error, state string) {
		t.Helper()
		var ge *pool.GrantedError
		if !errors.As(err, &ge) || ge.State != state || string(ge.Slot) != "1" || ge.RequestID != q.RequestID {
			t.Errorf("%s = %v (%+v), want granted slot 1, %s", what, err, ge, state)
			return
		}
		if !errors.Is(err, pool.ErrGranted) || !errors.Is(err, pool.ErrQueueEntryLost) {
			t.Errorf("%s = %v: want it to match ErrGranted and ErrQueueEntryLost", what, err)
		}
	}
	_, err = tp.HeartbeatEntry(ctx, q.RequestID, "ci-alice")
	want("heartbeat while provisioning", err, pool.GrantProvisioning)
	_, err = tp.TryGrant(ctx, q.RequestID, "ci-alice")
	want("try-grant while provisioning", err, pool.GrantProvisioning)
	// The lease of the slot being provisioned names the owner.
	if _, err := tp.HeartbeatEntry(ctx, q.RequestID, "ci-mallory"); !errors.Is(err, lease.ErrNotOwner) {
		t.Errorf("another owner's heartbeat while provisioning = %v, want ErrNotOwner", err)
	}
	if err := tp.Withdraw(ctx, q.RequestID, "ci-mallory"); !errors.Is(err, lease.ErrNotOwner) {
		t.Errorf("another owner's withdraw while provisioning = %v, want ErrNotOwner", err)
	}
	close(finish)
	if err := <-done; err != nil {
		t.Fatalf("the grant: %v", err)
	}
	_, err = tp.HeartbeatEntry(ctx, q.RequestID, "ci-alice")
	want("heartbeat once granted", err, pool.GrantReady)
	_, err = tp.Wait(ctx, q.RequestID, "ci-alice", 0)
	want("waiter once granted", err, pool.GrantReady)
	if err := tp.Withdraw(ctx, q.RequestID, "ci-alice"); err != nil {
		t.Errorf("the owner's withdraw of a granted request = %v, want nil (nothing to withdraw)", err)
	}
	if _, err := tp.HeartbeatEntry(ctx, q.RequestID, "ci-mallory"); !errors.Is(err, lease.ErrNotOwner) {
		t.Errorf("another owner's heartbeat once granted = %v, want ErrNotOwner", err)
	}
}

// TestFailedGrantIsReportedAsClaimed: a request whose grant failed is
// reported with its recorded failure, as claim reports it (the failure
// record names no owner, so it is told to anyone, as claim tells it).
func TestFailedGrantIsReportedAsClaimed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	tp.runner.SetFail(func(ctx context.Context, c call) error {
		if c.Action == provision.ActionProvision {
			return errors.New("no database")
		}
		return nil
	})
	q, err := tp.Enqueue(ctx, "ci-alice", "", pool.ModeBlocking)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tp.TryGrant(ctx, q.RequestID, "ci-alice"); !errors.Is(err, pool.ErrProvisionFailed) {
		t.Fatalf("grant with a failing provision = %v", err)
	}
	for _, owner := range []string{"ci-alice", "ci-mallory"} {
		_, err := tp.HeartbeatEntry(ctx, q.RequestID, owner)
		var ce *pool.ClaimError
		if !errors.As(err, &ce) || ce.State != pool.GrantResetFailed || !errors.Is(err, pool.ErrProvisionFailed) {
			t.Errorf("heartbeat by %s of a request whose grant failed = %v, want %s", owner, err, pool.GrantResetFailed)
		}
		if _, err := tp.TryGrant(ctx, q.RequestID, owner); !errors.As(err, &ce) || ce.State != pool.GrantResetFailed {
			t.Errorf("try-grant by %s of a request whose grant failed = %v, want %s", owner, err, pool.GrantResetFailed)
		}
	}
	// A request nobody knows is still lost.
	if _, err := tp.HeartbeatEntry(ctx, "never-queued", "ci-alice"); !errors.Is(err, pool.ErrQueueEntryLost) || errors.Is(err, pool.ErrGranted) {
		t.Errorf("heartbeat of an unknown request = %v, want ErrQueueEntryLost", err)
	}
}

// TestOwnerFenceAndExactOwners: the caller's owner must match the owner
// pattern (a usage error, judged first); owners are then compared
// exactly, as a lease's are: no case folding, and an entry's owner need
// not match the pattern of the process that checks it.
func TestOwnerFenceAndExactOwners(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	q, err := tp.Enqueue(ctx, "ci-alice", "", pool.ModeBlocking)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tp.TryGrant(ctx, q.RequestID, "CI-ALICE"); !errors.Is(err, lease.ErrNotOwner) {
		t.Errorf("try-grant by CI-ALICE of ci-alice's entry = %v, want ErrNotOwner", err)
	}
	st, err := dirstore.Open(tp.store, lease.WithClock(tp.clock), lease.WithOwnerPattern(`^pt-[a-z]+$`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pool.LoadFile(filepath.Join(tp.root, "pool.json"))
	if err != nil {
		t.Fatal(err)
	}
	fenced, err := pool.Open(st, cfg, pool.Options{ScriptRunner: tp.runner.run})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		call func(owner string) error
	}{
		{"try-grant", func(o string) error { _, err := fenced.TryGrant(ctx, q.RequestID, o); return err }},
		{"heartbeat-entry", func(o string) error { _, err := fenced.HeartbeatEntry(ctx, q.RequestID, o); return err }},
		{"waiter", func(o string) error { _, err := fenced.Wait(ctx, q.RequestID, o, 0); return err }},
		{"claim", func(o string) error { _, err := fenced.Claim(ctx, q.RequestID, o); return err }},
	} {
		if err := step.call("ci-alice"); !errors.Is(err, pool.ErrInvalid) {
			t.Errorf("%s by an owner outside the pattern = %v, want ErrInvalid", step.name, err)
		}
		if step.name == "claim" {
			continue // a queued request's position is told to anyone
		}
		err := step.call("pt-mallory")
		if !errors.Is(err, lease.ErrNotOwner) || !strings.Contains(err.Error(), `belongs to another owner ("ci-alice")`) {
			t.Errorf("%s by pt-mallory = %v, want ErrNotOwner naming ci-alice", step.name, err)
		}
	}
	if tp.slotState(t, "1") != lease.Free || len(readQueue(tp.Pool)) != 1 {
		t.Errorf("the refusals changed the pool: slot %s, queue %+v", tp.slotState(t, "1"), readQueue(tp.Pool))
	}
}
