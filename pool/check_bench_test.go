package pool_test

import (
	"context"
	"fmt"
	"github.com/durable-lease/durable-lease/pool"
	"testing"
)

// BenchmarkWaiterCheck is what a waiter behind the front does at each of
// its checks (every quarter of waiterStaleMs, or when rung): read the
// queue, find its place, and work out its position and ETA.
//
//	go test -run '^$' -bench WaiterCheck -benchmem ./pool/
func BenchmarkWaiterCheck(b *testing.B) {
	for _, n := range []int{10, 200, 500} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			p := newRealPool(b, `{"name":"p","slots":[{"id":1}]}`, pool.Options{})
			ctx := context.Background()
			var last string
			for i := range n {
				e, _, err := p.EnqueueForTest(ctx, fmt.Sprintf("w%d", i), "", pool.ModeBlocking)
				if err != nil {
					b.Fatal(err)
				}
				last = e.ID
			}
			b.ResetTimer()
			for range b.N {
				_, idx := p.MayGrantForTest(ctx, last)
				if idx != n-1 {
					b.Fatalf("index %d, want %d", idx, n-1)
				}
				_ = p.PositionForTest(ctx, last, idx)
			}
		})
	}
}
