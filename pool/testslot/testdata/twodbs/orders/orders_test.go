// Package orders stands for a package whose tests need a database of their
// own: its TestMain holds a slot of ../dbs.json (a pool of two databases)
// while they run, and they use the slot's DATABASE_URL. TestTwoPackages
// (package testslot) runs it beside its twin.
package orders

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/pool/testslot"
)

func TestMain(m *testing.M) {
	os.Exit(testslot.Main(m, "../dbs.json"))
}

func TestWithItsOwnDatabase(t *testing.T) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("no DATABASE_URL: TestMain holds no slot")
	}
	fmt.Printf("orders: slot %s, %s\n", os.Getenv("POOL_RUN_SLOT"), url)
	// Under TestTwoPackages: hold the database until the other package's
	// tests hold theirs, so that the two hold at once.
	if dir := os.Getenv("TESTSLOT_TOGETHER"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "orders"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			if names, _ := os.ReadDir(dir); len(names) == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the other package's tests never ran beside these")
			}
		}
	}
}
