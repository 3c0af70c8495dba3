package pool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/durable-lease/durable-lease/lease"
)

// BenchmarkWaiterCheck is what a waiter behind the front does at each of
// its checks (every quarter of waiterStaleMs, or when rung): read the
// queue, find its place, and work out its position and ETA.
//
//	go test -run '^$' -bench WaiterCheck -benchmem ./pool/
func BenchmarkWaiterCheck(b *testing.B) {
	for _, n := range []int{10, 200, 500} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			root := b.TempDir()
			file := filepath.Join(root, "pool.json")
			if err := os.WriteFile(file, []byte(`{"name":"p","slots":[{"id":1}]}`), 0o600); err != nil {
				b.Fatal(err)
			}
			cfg, err := LoadFile(file)
			if err != nil {
				b.Fatal(err)
			}
			st, err := lease.Open(filepath.Join(root, "store"))
			if err != nil {
				b.Fatal(err)
			}
			p, err := Open(st, cfg, Options{Runner: (&fakeRunner{}).run})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			var last string
			for i := range n {
				e, _, err := p.enqueue(ctx, fmt.Sprintf("w%d", i), "", ModeBlocking)
				if err != nil {
					b.Fatal(err)
				}
				last = e.ID
			}
			b.ResetTimer()
			for range b.N {
				_, idx := p.mayGrant(ctx, last)
				if idx != n-1 {
					b.Fatalf("index %d, want %d", idx, n-1)
				}
				_ = p.position(ctx, last, idx)
			}
		})
	}
}
