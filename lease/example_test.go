package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/lease"
)

// Take a lease, keep it alive while the work runs, give it back. The
// store is a directory every process of the host that shares the lease
// opens (dirstore.UserStoreDir is the one the commands use by default);
// here a scratch one.
func Example() {
	dir, err := os.MkdirTemp("", "leases-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := dirstore.Open(filepath.Join(dir, "store"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// One holder at a time: a second acquire is refused while this one
	// holds the lease (AcquireWait would wait for it instead).
	acq, err := store.Acquire(ctx, lease.Request{Kind: "merge-baton", Owner: "agent-7", TTLMinutes: 1})
	if err != nil {
		log.Fatal(err)
	}
	_, err = store.Acquire(ctx, lease.Request{Kind: "merge-baton", Owner: "agent-8", TTLMinutes: 1})
	var held *lease.HeldError
	fmt.Println("agent-8 refused:", errors.As(err, &held), "held by", held.Record.Owner)

	// Keep heartbeats it (every TTL/8, here 7.5 s) until Release; Done
	// closes if it is lost, and then the work must stop.
	hold, err := store.Keep(ctx, "merge-baton", "agent-7", acq.Record.Token, lease.HoldOptions{Acquired: acq.Record})
	if err != nil {
		log.Fatal(err)
	}
	select {
	case <-hold.Done():
		log.Fatal(hold.Err())
	case <-time.After(10 * time.Millisecond): // the work
	}
	if err := hold.Release(ctx); err != nil {
		log.Fatal(err)
	}
	st, err := store.Status(ctx, "merge-baton")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("fence", acq.Record.Fence, "then", st.State)
	// Output:
	// agent-8 refused: true held by agent-7
	// fence 1 then free
}
