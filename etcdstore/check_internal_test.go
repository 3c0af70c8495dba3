package etcdstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
)

// benchStores numbers the stores BenchmarkCheck opens for the first time,
// across its runs on one cluster.
var benchStores int

// BenchmarkCheck is what the registry check adds to an open: the first
// read alone (the code before the registry), the check of a registered
// store (the same read, in one read-only transaction with the
// registrations: every open but the first), and the first open of a
// store (that read, then the registration transaction).
func BenchmarkCheck(b *testing.B) {
	benchStores = 0
	c := etcdtest.Start(b)
	ctx := context.Background()
	be, err := NewBackend(ctx, c.URL("bench"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	b.Run("probe only", func(b *testing.B) {
		for b.Loop() {
			if _, err := be.probe(ctx, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("registered", func(b *testing.B) {
		for b.Loop() {
			if ok, err := be.check(ctx); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("first open", func(b *testing.B) {
		for b.Loop() {
			benchStores++
			be.loc.Prefix = fmt.Sprintf("/bench-%d/x", benchStores)
			if ok, err := be.check(ctx); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
}
