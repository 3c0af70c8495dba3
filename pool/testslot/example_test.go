package testslot_test

import (
	"fmt"
	"log"
	"os"

	"github.com/durable-lease/durable-lease/pool/testslot"
)

// tests stands for a *testing.M: the package's tests, which read the
// slot's environment.
type tests struct{}

func (tests) Run() int {
	fmt.Println("the tests run with", os.Getenv("DATABASE_URL"), "of slot", os.Getenv("POOL_RUN_SLOT"))
	return 0
}

// A package's main_test.go holds a slot for the whole test binary with
//
//	func TestMain(m *testing.M) {
//		os.Exit(testslot.Main(m, "../testdata/dbs.json"))
//	}
//
// Here a stand-in for m, and a scratch store: leave LEASE_STORE unset to
// share the user's store, and so the pool's slots, with pool-run.
func ExampleMain() {
	store, err := os.MkdirTemp("", "store-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(store)
	os.Setenv("LEASE_STORE", store)
	defer os.Unsetenv("LEASE_STORE")

	fmt.Println("exit", testslot.Main(tests{}, "testdata/twodbs/dbs.json"))
	// Output:
	// the tests run with postgresql://localhost:5432/app_test_1 of slot 1
	// exit 0
}
