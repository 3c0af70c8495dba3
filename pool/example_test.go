package pool_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/durable-lease/durable-lease/dirstore"
	_ "github.com/durable-lease/durable-lease/dirstore/dirpool" // a directory store's pools
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// Take a slot of a pool of two databases, read what the grant says, keep
// the slot while the work runs and give it back. A pool file on disk is
// read with pool.LoadFile; here it is given in code.
func Example() {
	dir, err := os.MkdirTemp("", "pool-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg, err := pool.Parse([]byte(`{
	  "ttlMinutes": 5,
	  "grantEnv": { "DATABASE_URL": "postgresql://localhost:5432/{db}" },
	  "slots": [
	    { "id": 1, "db": "app_test_1" },
	    { "id": 2, "db": "app_test_2" }
	  ]
	}`), dir)
	if err != nil {
		log.Fatal(err)
	}
	store, err := dirstore.Open(filepath.Join(dir, "store"))
	if err != nil {
		log.Fatal(err)
	}
	p, err := pool.Open(store, cfg, pool.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// Acquire waits in the pool's queue for a free slot (NoWait refuses
	// instead), runs its provision and health commands, and grants it.
	g, err := p.Acquire(ctx, pool.AcquireRequest{Owner: "ci-main"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("slot", g.Slot, "of", len(cfg.Slots), g.Env["DATABASE_URL"], "fence", g.Fence)
	other, err := p.Acquire(ctx, pool.AcquireRequest{Owner: "ci-other", NoWait: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("slot", other.Slot, other.Env["DATABASE_URL"])

	// Keep heartbeats the slot; its Release gives it back to the pool.
	hold, err := p.Keep(ctx, g, lease.HoldOptions{})
	if err != nil {
		log.Fatal(err)
	}
	// ... the work, which stops if <-hold.Done() ...
	if err := hold.Release(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := p.Release(ctx, fmt.Sprint(other.Slot), other.Owner, other.Token, false); err != nil {
		log.Fatal(err)
	}
	st, err := p.Status(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range st.Slots {
		fmt.Println("slot", s.Slot.ID, s.State)
	}
	// Output:
	// slot 1 of 2 postgresql://localhost:5432/app_test_1 fence 1
	// slot 2 postgresql://localhost:5432/app_test_2
	// slot 1 free
	// slot 2 free
}
