package dirpool

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// plantQueueLock makes the queue lock held for process proc, as if that
// process had died (or were still) inside a queue mutation.
func plantQueueLock(t *testing.T, tp *testPool, proc lease.Process) {
	t.Helper()
	payload, _ := json.Marshal(proc)
	if _, err := tp.Store().Acquire(context.Background(), lease.Request{
		Kind: tp.Config().QueueLockKind, Owner: "ghost", TTLMinutes: queueLockTTLMinutes, Payload: payload,
	}); err != nil {
		t.Fatal(err)
	}
}

// A process killed inside a queue mutation leaves the queue lock held. The
// next process proves the holder dead from the lock's payload and takes the
// lock at once, loudly, instead of stalling every waiter for the lock's TTL.
func TestDeadQueueLockHolderIsRecovered(t *testing.T) {
	t.Parallel()
	child := exec.Command(os.Args[0], "-test.run=^$")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	dead := lease.Self()
	dead.PID, dead.Start = child.Process.Pid, 1
	if !dead.Dead() {
		t.Skip("this host cannot prove a process dead (no /proc)")
	}
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	plantQueueLock(t, tp, dead)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := tp.Acquire(ctx, pool.AcquireRequest{Owner: "agent-7", NoWait: true}); err != nil {
		t.Fatalf("Acquire behind a dead holder's queue lock: %v", err)
	}
	if got := eventsNamed(logEvents(t, tp.Dir()), "queue_lock_recovered"); len(got) != 1 {
		t.Errorf("queue_lock_recovered events = %v, want 1", got)
	}
}

// A queue lock held for a live process, or for a holder that cannot be
// identified (the Node tool writes no payload), is waited for.
func TestLiveQueueLockHolderIsWaitedFor(t *testing.T) {
	t.Parallel()
	for name, proc := range map[string]lease.Process{"live": lease.Self(), "unidentified": {}} {
		t.Run(name, func(t *testing.T) {
			tp := newTestPool(t, oneSlotPool, pool.Options{})
			plantQueueLock(t, tp, proc)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err := tp.Acquire(ctx, pool.AcquireRequest{Owner: "agent-7", NoWait: true})
			if err == nil || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, lease.ErrTimeout) && !errors.Is(err, pool.ErrQueueBusy) {
				t.Fatalf("Acquire = %v, want it to wait for the lock", err)
			}
			if got := eventsNamed(logEvents(t, tp.Dir()), "queue_lock_recovered"); len(got) != 0 {
				t.Errorf("recovered a lock whose holder is not provably dead: %v", got)
			}
		})
	}
}

// A process SIGKILLed inside a queue mutation may still read as running in
// /proc for a moment after the kernel dropped its locks. A lock naming
// this pool's directory is recovered on the proof of the local flock we
// hold, whatever /proc says: here it names this very (live) process.
func TestQueueLockRecoveredOnTheFlockProof(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	payload, _ := json.Marshal(lockHolder{Process: lease.Self(), DirLock: tp.Dir()})
	if _, err := tp.Store().Acquire(context.Background(), lease.Request{
		Kind: tp.Config().QueueLockKind, Owner: "ghost", TTLMinutes: queueLockTTLMinutes, Payload: payload,
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := tp.Acquire(ctx, pool.AcquireRequest{Owner: "agent-7", NoWait: true}); err != nil {
		t.Fatalf("Acquire behind a lock whose holder cannot hold it: %v", err)
	}
	if got := eventsNamed(logEvents(t, tp.Dir()), "queue_lock_recovered"); len(got) != 1 {
		t.Errorf("queue_lock_recovered events = %v, want 1", got)
	}
}
