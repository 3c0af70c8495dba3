package pool_test

import (
	"context"
	"fmt"
	"github.com/durable-lease/durable-lease/pool"
	"testing"
	"time"
)

// Only the first len(slots) live entries may be granted, so only they
// listen to slot events; an entry not found says yes (the attempt then
// reports it lost).
func TestMayGrant(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pool string
		want []bool
	}{{oneSlotPool, []bool{true, false, false}}, {twoSlotPool, []bool{true, true, false}}} {
		tp := newTestPool(t, c.pool, pool.Options{})
		ctx := context.Background()
		var ids []string
		for i := range c.want {
			e, _, err := tp.EnqueueForTest(ctx, fmt.Sprintf("w%d", i), "", pool.ModeBlocking)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, e.ID)
		}
		for i, id := range ids {
			if got, idx := tp.MayGrantForTest(context.Background(), id); got != c.want[i] || idx != i {
				t.Errorf("%d slots: mayGrant(entry %d) = %v, %d, want %v, %d", len(tp.Config().Slots), i, got, idx, c.want[i], i)
			}
		}
		if may, idx := tp.MayGrantForTest(context.Background(), "not-queued"); !may || idx != -1 {
			t.Error("mayGrant of an entry not queued = false")
		}
	}
}

// Waiters far back in the queue do not watch the slots; each must still be
// served within milliseconds once the queue moves it to the front, not at
// its next poll (here 10 s), in FIFO order.
func TestFarWaitersServedOnQueueMove(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{Poll: 10 * time.Second})
	ctx := context.Background()
	g := tp.mustAcquire(t, "holder")
	const n = 4
	got := make(chan *pool.Grant, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			g, err := tp.Acquire(ctx, pool.AcquireRequest{Owner: fmt.Sprintf("w%d", i), Wait: 30 * time.Second})
			if err != nil {
				errs <- err
				return
			}
			got <- g
		}()
		deadline := time.Now().Add(5 * time.Second)
		for len(readQueue(tp.Pool)) < i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d never queued", i)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	time.Sleep(50 * time.Millisecond)
	for i := range n {
		start := time.Now()
		if _, err := tp.Release(ctx, "1", g.Owner, g.Token, false); err != nil {
			t.Fatal(err)
		}
		select {
		case g = <-got:
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(3 * time.Second):
			t.Fatalf("hand-off %d: no waiter granted within 3 s (poll is 10 s)", i)
		}
		if want := fmt.Sprintf("w%d", i); g.Owner != want {
			t.Fatalf("hand-off %d went to %s, want %s (FIFO)", i, g.Owner, want)
		}
		t.Logf("hand-off %d: %s", i, time.Since(start))
	}
}
