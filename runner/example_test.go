package runner_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/durable-lease/durable-lease/dirstore"
	_ "github.com/durable-lease/durable-lease/dirstore/dirpool" // a directory store's pools
	"github.com/durable-lease/durable-lease/pool"
	"github.com/durable-lease/durable-lease/runner"
)

// Run a command holding a slot of a pool, as pool-run does: acquire
// (waiting in the queue), heartbeat while it runs, stop it if the slot is
// lost, give the slot back on every way out. The command gets the grant's
// environment and POOL_RUN_SLOT; its exit status is the result's. The
// program that calls Command starts the work through itself (the
// package's init serves as the guardian), so it must link this package.
func ExampleCommand() {
	dir, err := os.MkdirTemp("", "runner-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg, err := pool.Parse([]byte(`{
	  "grantEnv": { "DATABASE_URL": "postgresql://localhost:5432/{db}" },
	  "slots": [{ "id": 1, "db": "app_test_1" }, { "id": 2, "db": "app_test_2" }]
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
	res := runner.Command(context.Background(), runner.Options{
		Store: store, Pool: p, Owner: "ci-main",
		Log: io.Discard, // else a line on stderr for a wait or a loss
	}, []string{"sh", "-c", `echo "slot $POOL_RUN_SLOT: $DATABASE_URL"; exit 3`})
	fmt.Println("exit", res.Exit, res.Code, "held", res.Held)
	// Output:
	// slot 1: postgresql://localhost:5432/app_test_1
	// exit 3 failed held slot 1 of pool pool
}
